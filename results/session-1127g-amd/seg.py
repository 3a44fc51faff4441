import re,sys,statistics as st
ev=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)',l)
    if m: ev.append((m.group(1),int(m.group(2)),int(m.group(3)),float(m.group(4))*1e6,m.group(5),m.group(6)))
segs=[]
i=0
while i<len(ev):
    c,pid,cpu,t,name,rest=ev[i]
    if c=='ping' and name=='syscalls:sys_enter_sendto':
        t0=t; pcpu=cpu; marks=[('send',t0,cpu)]
        j=i+1
        while j<len(ev) and ev[j][3]-t0<5000:
            c2,p2,cpu2,t2,n2,r2=ev[j]
            if n2=='sched:sched_waking' and 'comm=vrhost-worker' in r2 and len(marks)==1: marks.append(('wk_waking',t2,cpu2))
            elif c2=='vrhost-worker' and n2=='syscalls:sys_exit_ppoll' and len(marks)==2: marks.append(('wk_run',t2,cpu2))
            elif c2=='vrhost-worker' and n2=='syscalls:sys_enter_sendto' : marks.append(('wk_send',t2,cpu2))
            elif n2=='sched:sched_switch' and 'next_comm=bench.0' in r2: marks.append(('vr_in',t2,cpu2))
            elif n2=='sched:sched_waking' and 'comm=ping' in r2: marks.append(('ping_waking',t2,cpu2))
            elif n2=='sched:sched_switch' and 'next_comm=ping' in r2 and marks[-1][0]=='ping_waking':
                marks.append(('ping_run',t2,cpu2)); break
            j+=1
        segs.append(marks); i=j
    i+=1
for m in segs:
    print(' '.join(f"{n}@{cpu}+{t-m[0][1]:.0f}" for n,t,cpu in m))

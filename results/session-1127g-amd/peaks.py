import json,sys
s=open(sys.argv[1]).read()
j=json.loads(s[s.index('{\n'):s.rindex('}')+1])
best={}
for r in j['results']:
    k=(r['frame_bytes'],r['routes'],r['forwarder'])
    if r['forwarder']=='generator': continue
    if r['forwarded_pps'] and r['forwarded_pps']>best.get(k,(0,))[0]: best[k]=(r['forwarded_pps'],r['generator'],r['load'],r.get('cpu_ns_per_pkt'))
for fb in (64,1500):
  for rt in sorted({k[1] for k in best if k[0]==fb}):
    kern=max(best.get((fb,rt,f),(0,))[0] for f in ('kernel','kernel_norps'))
    for f in ('kernel','kernel_norps','af_xdp','af_xdp_txlive','socket'):
        if (fb,rt,f) in best:
            b=best[(fb,rt,f)]; print(fb,rt,f,f"{b[0]/1e6:.3f} Mpps",b[1],b[2],f"{b[0]/kern:.2f}x" if kern else '')
for r in j['results']:
    if r['rtt_us_avg'] and r['frame_bytes']==64 and r['load']==0.25 and r['generator']=='live' : print('rtt',r['forwarder'],r['routes'],r['rtt_us_avg'],r['rtt_us_p99'],r['rtt_idle_us_p99'])
for t in j['tcp_best']: print('tcp',t['forwarder'],round(t['tcp_gbps'],2),t['kernel_at'],round(t['kernel_gbps'],2),round(t['ratio'],2))

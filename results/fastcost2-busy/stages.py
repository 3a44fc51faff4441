import re,sys,collections,bisect
lines=[tuple(map(int,l.split())) for l in open(sys.argv[1]+'.lines')]
ks=lines[0][0]
fmap={}; cur=None
for l in open(sys.argv[2]):
    m=re.search(r'\[file:.*/([^/ ]+) line_num:(\d+)',l)
    if m: cur=(m.group(1),int(m.group(2))); continue
    m=re.match(r'\s*(\d+):',l)
    if m and cur: fmap[int(m.group(1))]=cur
offs=[a-ks for a,_,_,_ in lines]
# stage by source text
# argv: <prefix of jit_lines.py's output> <bpftool prog dump xlated id N linum> <perf script -F ip,sym,symoff | grep _xdp_router+> <the ebpf/ directory the program was built from>
src={f:open(sys.argv[4]+'/'+f).read().split('\n') for f in ['xdp_router.c','xdp_tunnel.h','xdp_cache.h','xdp_fib.h','xdp_ttl.h']}
def stage(f,ln):
    t=src[f][ln-1] if ln and ln<=len(src[f]) else ''
    if f=='xdp_tunnel.h': return 'entry, tunnel gate'
    if f=='xdp_cache.h': return 'select cache, generations'
    if f=='xdp_fib.h': return 'route lookup'
    if f=='xdp_ttl.h': return 'TTL, checksum update (and the redirect helper\'s return)'
    for key,name in [('sk = {','entry, tunnel gate'),('tun_decap','entry, tunnel gate'),('fast_cpus','spread check'),('spread(','spread check'),('fc->count','spread check'),('h ^=','spread check'),('__u32 h =','spread check'),('bpf_redirect_map(&out_ports','redirect helper'),('h_source','MAC rewrite'),('h_dest, n->','MAC rewrite'),('neigh','neighbour cache'),('hop','neighbour cache'),('ngen','neighbour cache'),('fib_vrs','route lookup'),('switch (mode)','route lookup'),('route(','route lookup'),('*t == 0','route lookup'),('sum','header checksum'),('w[i]','header checksum'),('checksum','header checksum'),('conf->addr','own addresses'),('naddrs','own addresses'),('own_addr','own addresses'),('counters','counters, VR config'),('c->','counters, VR config'),('vrs,','counters, VR config'),('conf','counters, VR config'),('ip->','IP header checks'),('tot','IP header checks'),('select','select cache, generations'),('sel_','select cache, generations'),('sgen','select cache, generations'),('dst_mac','select cache, generations'),('fast_cache','select cache, generations'),('e->','select cache, generations'),('proto','Ethernet'),('eth','Ethernet')]:
        if key in t: return name
    return 'other (%s:%d)'%(f,ln)
cnt=collections.Counter(); tot=0
for l in open(sys.argv[3]):
    if '+0x' not in l: continue
    o=int(l.strip().split('+0x')[1],16)
    k=bisect.bisect_right(offs,o)-1
    a,insn,line,fo=lines[k]
    f,ln=fmap.get(insn,('xdp_router.c',line))
    cnt[stage(f,ln)]+=1; tot+=1
print('samples in xdp_router: %d'%tot)
for s,c in cnt.most_common(25): print('%5.1f%%  %s'%(100*c/tot,s))

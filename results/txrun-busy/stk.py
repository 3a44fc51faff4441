import sys,subprocess,collections
f=sys.argv[1]; roots=sys.argv[2].split(',')
out=subprocess.run(['perf','script','-i',f,'-F','comm,ip,sym'],capture_output=True,text=True).stdout
samples=out.split('\n\n'); tot=0; c=collections.Counter()
keys=['tcp_v4_rcv','tcp_write_xmit','__xsk_rcv','xsk_build_skb','sock_alloc_send_pskb','page_pool','veth_xmit','__netif_receive_skb','kfree_skb','consume_skb','xsk_destruct_skb','mem_allocator_disconnect','xdp_test_run_init_page','veth_xdp_rcv','dev_gro_receive','napi_gro','bpf_prog_run_generic_xdp','memcpy','xdp_do_redirect','skb_pp_cow_data','ip_rcv']
for s in samples:
    lines=s.strip().split('\n')
    if not lines or not lines[0].strip(): continue
    tot+=1
    syms=[l.strip().split()[-1] if l.strip() else '' for l in lines[1:]]
    for r in roots:
        if any(x==r for x in syms):
            c[r]+=1
            for k in keys:
                if any(k in x for x in syms): c[r+' > '+k]+=1
print('samples',tot)
for k,v in sorted(c.items()): print(f"{v/tot*100:6.2f}% {k}")

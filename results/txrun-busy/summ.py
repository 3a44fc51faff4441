import json,glob,sys
for f in sorted(glob.glob(sys.argv[1] if len(sys.argv)>1 else 'ab-*.json')):
    d=json.load(open(f))
    r={p['forwarder']:p for p in d['results'] if p.get('tcp_gbps') is not None}
    k=r.get('kernel',{}); t=r.get('af_xdp_txlive',{})
    fw={p['forwarder']:p.get('forwarded_mpps') or p.get('fwd_mpps') for p in d['results']}
    b=d['tcp_best'][0]
    print(f"{f}: 1500B fwd kpps kernel {k.get('forwarded_pps',0)/1e3:.0f} txlive {t.get('forwarded_pps',0)/1e3:.0f} | TCP kernel {k.get('tcp_gbps',0):.2f} txlive {t.get('tcp_gbps',0):.2f} (pinned {t.get('tcp_gbps_pinned',0):.2f} unpinned {t.get('tcp_gbps_unpinned',0):.2f}) ratio {b['ratio']:.2f} runs {t.get('tcp_tx_runs')} data/run {t.get('tcp_frames_per_run',0):.1f} ack/run {t.get('tcp_ack_frames_per_run',0):.2f} retx {t.get('tcp_retransmits')} lost {t.get('tcp_lost_frames')} cpu_ns/pkt {t.get('cpu_ns_per_pkt',0):.0f} vrhost_cpu_ns/pkt {t.get('vrhost_cpu_ns_per_pkt',0):.0f}")

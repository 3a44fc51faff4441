//! A port fed by another owner's XDP program (External mode), and a
//! forked child that must not keep the port's program attached.

use super::*;

/// `ebpf/xdp_redirect.c` as the crate's build script compiled it: the
/// tests below load and attach it by hand, as another program's owner
/// (the fast path) would, to feed a port in External mode.
static REDIRECT_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_redirect.o"));

/// `xdp_redirect.c` loaded (not attached) by the test itself, with its
/// XSKMAP and counter.
struct HandProgram {
    xsks: XskMap<MapData>,
    redirected: PerCpuArray<MapData, u64>,
    ebpf: Ebpf,
}

impl HandProgram {
    fn load() -> HandProgram {
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("xsks", 4)
            .load(REDIRECT_OBJ)
            .expect("load xdp_redirect.o");
        let prog: &mut Xdp = ebpf
            .program_mut("xdp_redirect_xsk")
            .unwrap()
            .try_into()
            .unwrap();
        prog.load().expect("verifier");
        let xsks = ebpf.take_map("xsks").unwrap().try_into().unwrap();
        let redirected = ebpf.take_map("redirected").unwrap().try_into().unwrap();
        HandProgram {
            xsks,
            redirected,
            ebpf,
        }
    }

    /// Attach it to `a0` in namespace `ns` with the port's link type.
    fn attach(&mut self, ns: &Netns, mode: AttachMode) -> XdpLink {
        let prog: &mut Xdp = self
            .ebpf
            .program_mut("xdp_redirect_xsk")
            .unwrap()
            .try_into()
            .unwrap();
        let fd = prog.fd().unwrap();
        ns.run(|| {
            let name = CString::new("a0").unwrap();
            // SAFETY: a valid NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
            XdpLink::attach(fd.as_fd(), ifindex, mode)
        })
        .unwrap()
        .expect("attach xdp_redirect by hand")
    }

    fn redirected(&self) -> u64 {
        self.redirected.get(&0, 0).unwrap().iter().sum()
    }
}

/// Test frames among up to `n` rx bursts, none expected: how many came.
fn count_rx(port: &mut AfXdpPort, bursts: usize) -> usize {
    let mut got = 0;
    for _ in 0..bursts {
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = port.rx_burst(&mut out);
        got += out[..n].iter().filter(|f| seq_of(f).is_some()).count();
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// External mode: the port attaches nothing and receives nothing until
/// another program's XSKMAP holds its sockets; then it receives through
/// that program, whose attachment it leaves alone when dropped, and the
/// kernel takes its sockets out of that map when it closes them.
#[test]
fn external_mode_binds_without_a_program_and_serves_another_ones_map() {
    let (a, b) = lab();
    // The external program's attach mode is required.
    let no_mode = AfXdpConfig {
        program: XdpProgram::External,
        ..AfXdpConfig::default()
    };
    let e = a
        .run(|| AfXdpPort::open("a0", &no_mode))
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, AfXdpError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("External needs attach"), "{e}");

    let peer = b.run(|| Raw::open("b0")).unwrap();
    let mut seq = 0u32;
    for mode in [AttachMode::Native, AttachMode::Generic] {
        let cfg = AfXdpConfig {
            program: XdpProgram::External,
            attach: Some(mode),
            ..AfXdpConfig::default()
        };
        let mut port = open(&a, &cfg);
        assert_eq!(port.program(), XdpProgram::External);
        assert_eq!(port.mode().attach, mode, "the mode the config said");
        assert_eq!(port.mode().bind, BindMode::Copy, "veth: copy in both modes");
        assert!(port.redirected().is_none(), "no counter of its own");
        assert_eq!(xdp_on_a0(&a), None, "the port attached nothing");
        let socks: Vec<(u32, i32)> = port.sockets().map(|(q, fd)| (q, fd.as_raw_fd())).collect();
        assert_eq!(socks.len(), port.queues());
        assert_eq!(socks[0].0, 0);

        // No program on a0: the frames reach a0 and go to its kernel
        // stack, not to the port.
        let at_a0 = counter(&a, "a0", "rx_packets");
        for s in seq..seq + 50 {
            peer.send(&frame(s, len_of(s), MAC_B, MAC_A));
        }
        seq += 50;
        assert_eq!(count_rx(&mut port, 100), 0, "frames without a program");
        assert!(
            counter(&a, "a0", "rx_packets") - at_a0 >= 50,
            "frames reached a0"
        );

        // Another program attached, its map still empty: still nothing.
        let mut prog = HandProgram::load();
        let link = prog.attach(&a, mode);
        assert_eq!(link.mode(), mode);
        let tag = match mode {
            AttachMode::Native => "xdp",
            AttachMode::Generic => "xdpgeneric",
        };
        assert_eq!(xdp_on_a0(&a).as_deref(), Some(tag));
        for s in seq..seq + 50 {
            peer.send(&frame(s, len_of(s), MAC_B, MAC_A));
        }
        seq += 50;
        assert_eq!(count_rx(&mut port, 100), 0, "frames before the handover");
        assert_eq!(prog.redirected(), 0);

        // The port's sockets in that program's map: frames arrive, each
        // counted by that program.
        for (q, fd) in port.sockets() {
            prog.xsks.set(q, fd.as_raw_fd(), 0).expect("XSKMAP set");
        }
        for s in seq..seq + 500 {
            peer.send(&frame(s, len_of(s), MAC_B, MAC_A));
        }
        expect_rx(&mut port, seq..seq + 500);
        seq += 500;
        assert!(prog.redirected() >= 500, "{}", prog.redirected());
        assert_eq!(port.stats().rx_dropped, 0);

        // Dropping the port leaves the program attached; its sockets leave
        // the map with it (no redirect to a closed socket counted).
        drop(port);
        assert_eq!(
            xdp_on_a0(&a).as_deref(),
            Some(tag),
            "not the port's to detach"
        );
        let before = prog.redirected();
        for s in seq..seq + 50 {
            peer.send(&frame(s, len_of(s), MAC_B, MAC_A));
        }
        seq += 50;
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(prog.redirected(), before, "redirected to a closed socket");
        drop(link);
        assert_eq!(xdp_on_a0(&a), None, "detached by its link");
    }
}

/// The guarantee [`XdpLink`] exists for: dropping it detaches the
/// program even while a forked child holds a copy of the link's
/// descriptor (closing the descriptor alone would not).
#[test]
fn a_forked_child_does_not_keep_the_program_attached() {
    let (a, _b) = lab();
    let mut prog = HandProgram::load();
    let link = prog.attach(&a, AttachMode::Native);
    assert_eq!(xdp_on_a0(&a).as_deref(), Some("xdp"));
    // SAFETY: the child calls only async-signal-safe functions (pause,
    // _exit) before it is killed.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
    if child == 0 {
        // SAFETY: async-signal-safe; the child holds its copies of every
        // descriptor, the link's among them, until it dies.
        unsafe {
            libc::pause();
            libc::_exit(0);
        }
    }
    drop(link);
    let attached = xdp_on_a0(&a);
    // SAFETY: `child` is our child; kill and waitpid take no pointers
    // but the status, a live int.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
    }
    assert_eq!(attached, None, "the child's copy kept the program attached");
}

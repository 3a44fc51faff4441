//! The seccomp allowlist of a VR process, compiled to BPF by seccompiler.

use super::ConfineError;

/// System calls a VR may make with any arguments.
#[cfg(target_arch = "x86_64")]
const PLAIN: &[libc::c_long] = &[
    // loading the program
    libc::SYS_execve,
    libc::SYS_brk,
    libc::SYS_arch_prctl,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_openat,
    libc::SYS_open,
    libc::SYS_newfstatat,
    libc::SYS_fstat,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_statx,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_pread64,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getrandom,
    libc::SYS_uname,
    libc::SYS_prctl,
    // memory
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    // files it may read
    libc::SYS_read,
    libc::SYS_readv,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_close,
    libc::SYS_lseek,
    libc::SYS_fcntl,
    libc::SYS_getdents64,
    // its control socket and doorbells
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_poll,
    libc::SYS_ppoll,
    // scheduling and time
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_getcpu,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    // threads and signals of its own
    libc::SYS_futex,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
];

#[cfg(target_arch = "x86_64")]
pub(super) fn filters() -> Result<Vec<Vec<libc::sock_filter>>, ConfineError> {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
        SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
    };

    let bad = |e: seccompiler::BackendError| ConfineError::Unsupported(format!("seccomp: {e}"));
    // Dword: the kernel reads pids and ioctl requests as 32-bit values.
    let arg_is = |idx: u8, len: Len, op: Op, v: u64| -> Result<SeccompRule, ConfineError> {
        SeccompRule::new(vec![Cond::new(idx, len, op, v).map_err(bad)?]).map_err(bad)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        PLAIN.iter().map(|&n| (n, Vec::new())).collect();
    // Own process only (pid 0).
    rules.insert(libc::SYS_prlimit64, vec![arg_is(0, Len::Dword, Op::Eq, 0)?]);
    rules.insert(
        libc::SYS_sched_setaffinity,
        vec![arg_is(0, Len::Dword, Op::Eq, 0)?],
    );
    // Threads, never processes.
    let thread = libc::CLONE_THREAD as u64;
    rules.insert(
        libc::SYS_clone,
        vec![arg_is(0, Len::Qword, Op::MaskedEq(thread), thread)?],
    );
    // ioctl: non-blocking mode, close-on-exec, bytes to read, isatty.
    rules.insert(
        libc::SYS_ioctl,
        [libc::FIONBIO, libc::FIOCLEX, libc::FIONREAD, libc::TCGETS]
            .into_iter()
            .map(|r| arg_is(1, Len::Dword, Op::Eq, r))
            .collect::<Result<_, _>>()?,
    );
    let allow = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(bad)?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::x86_64,
    )
    .map_err(bad)?;
    let mut out = Vec::new();
    for f in [allow, clone3] {
        let prog: BpfProgram = f.try_into().map_err(bad)?;
        out.push(
            prog.iter()
                .map(|i| libc::sock_filter {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                })
                .collect(),
        );
    }
    Ok(out)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn filters() -> Result<Vec<Vec<libc::sock_filter>>, ConfineError> {
    Err(ConfineError::Unsupported(format!(
        "seccomp: no allowlist for {}",
        std::env::consts::ARCH
    )))
}

// ---------------------------------------------------------------------------
// The child's side.

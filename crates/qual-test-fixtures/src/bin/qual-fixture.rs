//! `qual-fixture <mode> [args]`: adversarial programs for process-containment tests. See the
//! crate docs for the modes. Exit code 64 means a usage error.

// Test fixture: it execs and reads /proc as the containment tests need.
#![allow(clippy::disallowed_methods)]
// Test fixture: adversarial forks, setsid and signal handling are the behaviour under test.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::time::Duration;

fn usage(msg: &str) -> ! {
    eprintln!("qual-fixture: failed to parse arguments: {msg}");
    std::process::exit(64)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| usage(&format!("missing or invalid {what}")))
}

fn flag(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name)
}

fn opt(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn sleep_secs(secs: f64) {
    std::thread::sleep(Duration::from_secs_f64(secs));
}

fn ignore_term() {
    // SAFETY: setting a signal disposition to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}

fn fork() -> libc::pid_t {
    // SAFETY: this fixture is single-threaded when it forks.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        eprintln!(
            "qual-fixture: failed to fork: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(70);
    }
    pid
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("help");
    match mode {
        "exit" => std::process::exit(arg(&args, 1, "CODE")),
        "print" => println!("{}", args.get(1).map(String::as_str).unwrap_or("")),
        "eprint" => eprintln!("{}", args.get(1).map(String::as_str).unwrap_or("")),
        "sleep" => sleep_secs(arg(&args, 1, "SECS")),
        "ignore-term" => {
            ignore_term();
            println!("ready");
            let _ = std::io::stdout().flush();
            sleep_secs(arg(&args, 1, "SECS"));
        }
        "escape" => escape(&args),
        "slow-term" => slow_term(arg(&args, 1, "SECS"), flag(&args, "--with-child")),
        "fork-children" => fork_children(&args),
        "nest-cgroup" => nest_cgroup(&arg::<String>(&args, 1, "PIDFILE")),
        "flood" => flood(arg(&args, 1, "BYTES")),
        "kill-self" => {
            let sig: i32 = arg(&args, 1, "SIGNAL");
            // SAFETY: raising a signal at ourselves.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            sleep_secs(5.0);
            std::process::exit(1);
        }
        "net-probe" => net_probe(arg(&args, 1, "PORT")),
        "send-stdout" => send_stdout(&arg::<String>(&args, 1, "SOCKET")),
        "write-case-result" => write_case_result(&args),
        "deny-syscalls" => deny_syscalls(&args),
        "touch-file" => {
            let path: String = arg(&args, 1, "PATH");
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| {
                    eprintln!("qual-fixture: failed to open {path}: {e}");
                    std::process::exit(1)
                });
            writeln!(f, "modified by qual-fixture").expect("append");
        }
        "help" | "--help" => {
            println!("usage: qual-fixture <mode> [args]; modes: exit print eprint sleep ignore-term escape fork-children flood kill-self net-probe write-case-result touch-file");
        }
        other => usage(&format!("unknown mode {other:?}")),
    }
}

fn escape(args: &[String]) {
    let pidfile: String = arg(args, 1, "PIDFILE");
    let keep_stdio = flag(args, "--keep-stdio");
    let ignore = flag(args, "--ignore-term");
    if fork() == 0 {
        // Child: leave the session and process group, then fork again and exit, so the
        // grandchild is orphaned (re-parented to the nearest subreaper).
        // SAFETY: plain syscall.
        unsafe { libc::setsid() };
        if fork() == 0 {
            if ignore {
                ignore_term();
            }
            if !keep_stdio {
                // Like a daemon: detach from the output pipes.
                // SAFETY: opening /dev/null and duplicating it over our stdio.
                unsafe {
                    let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    libc::dup2(fd, 0);
                    libc::dup2(fd, 1);
                    libc::dup2(fd, 2);
                }
            }
            let tmp = format!("{pidfile}.tmp");
            std::fs::write(&tmp, std::process::id().to_string()).expect("write pid file");
            std::fs::rename(&tmp, &pidfile).expect("publish pid file");
            loop {
                sleep_secs(3600.0);
            }
        }
        // SAFETY: leave without running destructors or flushing shared buffers.
        unsafe { libc::_exit(0) };
    }
    // Leader: wait for the grandchild to be established, reap the child, exit 0.
    for _ in 0..6000 {
        if std::path::Path::new(&pidfile).exists() {
            break;
        }
        sleep_secs(0.005);
    }
    let mut status = 0;
    // SAFETY: reaping our child.
    unsafe { libc::wait(&mut status) };
    println!("escaped");
    if let Some(secs) = opt(args, "--stay") {
        // Like a server that started a daemon: keep running (SIGTERM ends it).
        let _ = std::io::stdout().flush();
        sleep_secs(secs.parse().unwrap_or_else(|_| usage("invalid --stay")));
    }
}

static TERMS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn count_term(_: libc::c_int) {
    TERMS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Handles SIGTERM like a server with a slow cleanup: counts every SIGTERM, and once the first
/// arrived, waits SECS before printing `terms N` and exiting 0. With `--with-child` a forked
/// worker in the same process group does the same and prints `child terms N`.
fn slow_term(secs: f64, with_child: bool) {
    // SAFETY: installing a handler that only touches an atomic.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            count_term as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let child = with_child && fork() == 0;
    if !child {
        println!("ready");
        let _ = std::io::stdout().flush();
    }
    while TERMS.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        sleep_secs(0.01);
    }
    sleep_secs(secs);
    let n = TERMS.load(std::sync::atomic::Ordering::SeqCst);
    if child {
        println!("child terms {n}");
        let _ = std::io::stdout().flush();
        // SAFETY: leaving the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(0) };
    }
    if with_child {
        let mut status = 0;
        // SAFETY: reaping our child.
        unsafe { libc::wait(&mut status) };
    }
    println!("terms {n}");
}

/// Creates a cgroup beneath its own (cgroup v2) and forks a child that moves into it and keeps
/// running; prints the nested directory and exits 0 once the child wrote its pid to PIDFILE.
/// Exits 3 (printing why) where its cgroup cannot be nested.
fn nest_cgroup(pidfile: &str) {
    let no = |why: String| -> ! {
        println!("no-cgroup: {why}");
        std::process::exit(3)
    };
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mount = info
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4).map(String::from))?
        })
        .unwrap_or_else(|| no("no cgroup2 mount".into()));
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
        .unwrap_or_else(|| no("no cgroup v2 membership".into()));
    let nested = std::path::Path::new(&mount)
        .join(own.trim_start_matches('/'))
        .join(format!("nested-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&nested) {
        no(format!("cannot create {}: {e}", nested.display()));
    }
    if fork() == 0 {
        if std::fs::write(nested.join("cgroup.procs"), "0").is_err() {
            // SAFETY: leaving the forked child.
            unsafe { libc::_exit(3) };
        }
        let tmp = format!("{pidfile}.tmp");
        std::fs::write(&tmp, std::process::id().to_string()).expect("write pid file");
        std::fs::rename(&tmp, pidfile).expect("publish pid file");
        loop {
            sleep_secs(3600.0);
        }
    }
    for _ in 0..6000 {
        if std::path::Path::new(pidfile).exists() {
            println!("{}", nested.display());
            return;
        }
        let mut status = 0;
        // SAFETY: non-blocking reap of our child, to notice that it failed.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {
            let _ = std::fs::remove_dir(&nested);
            no("the child could not join the nested cgroup".into());
        }
        sleep_secs(0.005);
    }
    no("the child never started".into());
}

fn fork_children(args: &[String]) {
    let n: u32 = arg(args, 1, "N");
    let secs: f64 = arg(args, 2, "SECS");
    let wait = flag(args, "--wait");
    let mut spawned = 0;
    for _ in 0..n {
        if fork() == 0 {
            sleep_secs(secs);
            // SAFETY: leave without running the parent's atexit handlers.
            unsafe { libc::_exit(0) };
        }
        spawned += 1;
    }
    println!("forked {spawned}");
    let _ = std::io::stdout().flush();
    if wait {
        let mut status = 0;
        // SAFETY: reaping our children.
        while unsafe { libc::wait(&mut status) } > 0 {}
    }
}

fn flood(bytes: u64) {
    let chunk = vec![b'x'; 64 * 1024];
    let mut out = std::io::stdout().lock();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if out.write_all(&chunk[..n]).is_err() {
            std::process::exit(1);
        }
        left -= n as u64;
    }
    let _ = out.flush();
}

/// Hands our stdout descriptor to whoever listens on the UNIX socket SOCKET (SCM_RIGHTS),
/// then exits: the pipe stays open in a process outside our tree.
fn send_stdout(socket: &str) {
    use std::os::fd::AsRawFd;
    let stream = std::os::unix::net::UnixStream::connect(socket).unwrap_or_else(|e| {
        eprintln!("qual-fixture: failed to connect to {socket}: {e}");
        std::process::exit(1)
    });
    // SAFETY: building a one-descriptor SCM_RIGHTS message in local buffers.
    unsafe {
        let mut byte = [b'x'];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), 1);
        if libc::sendmsg(stream.as_raw_fd(), &msg, 0) != 1 {
            eprintln!(
                "qual-fixture: failed to send stdout: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
    println!("sent");
}

fn net_probe(port: u16) {
    let outside = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let outside_result =
        match TcpStream::connect_timeout(&outside.into(), Duration::from_millis(1500)) {
            Ok(_) => "connected".to_string(),
            Err(e) => format!("error: {e}"),
        };
    let round_trip = (|| -> std::io::Result<String> {
        let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        let addr = l.local_addr()?;
        let t = std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = l.accept()?;
            s.write_all(b"x")
        });
        let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut b = [0u8; 1];
        c.read_exact(&mut b)?;
        t.join().expect("accept thread")?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    })();
    let interfaces: Vec<String> = std::fs::read_to_string("/proc/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
        .collect();
    let rt = match &round_trip {
        Ok(s) => format!("ok:{s}"),
        Err(e) => format!("error: {e}"),
    };
    println!(
        "{{\"outside\":{:?},\"round_trip\":{:?},\"interfaces\":{:?}}}",
        outside_result, rt, interfaces
    );
    let ok = outside_result != "connected" && round_trip.is_ok();
    std::process::exit(if ok { 0 } else { 1 });
}

fn write_case_result(args: &[String]) {
    let kind: String = arg(args, 1, "KIND");
    let path = std::env::var("KILN_QUALIFICATION_CASE_RESULT")
        .unwrap_or_else(|_| usage("KILN_QUALIFICATION_CASE_RESULT is not set"));
    let case_id = opt(args, "--case-id").unwrap_or_else(|| "fixture-case".into());
    let metric = opt(args, "--metric").unwrap_or_else(|| "fixture_metric".into());
    let config = opt(args, "--config").unwrap_or_else(|| "{}".into());
    let metric_json = |name: &str| {
        format!(
            "{{\"aggregation\":\"mean\",\"lower_is_better\":false,\"name\":\"{name}\",\"unit\":\"count\",\"value\":1}}"
        )
    };
    let doc = |case_id: &str, status: &str, metrics: &[String]| {
        format!(
            "{{\"case_id\":\"{case_id}\",\"details\":null,\"duration_seconds\":0.5,\"effective_config\":{config},\"metrics\":[{}],\"schema_version\":1,\"status\":\"{status}\",\"tolerances\":[]}}\n",
            metrics.join(",")
        )
    };
    let mut exit = 0;
    match kind.as_str() {
        "valid" => std::fs::write(&path, doc(&case_id, "passed", &[metric_json(&metric)])),
        "oversized" => {
            let bytes: u64 = opt(args, "--bytes")
                .map(|b| b.parse().unwrap_or_else(|_| usage("invalid --bytes")))
                .unwrap_or(100_000_000);
            (|| {
                let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
                f.write_all(b"{\"details\":\"")?;
                let chunk = vec![b'a'; 64 * 1024];
                let mut left = bytes.saturating_sub(14);
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    f.write_all(&chunk[..n])?;
                    left -= n as u64;
                }
                f.write_all(b"\"}")?;
                f.flush()
            })()
        }
        "wrong-case-id" => std::fs::write(
            &path,
            doc(
                &format!("{case_id}-wrong"),
                "passed",
                &[metric_json(&metric)],
            ),
        ),
        "undeclared-metric" => {
            let mut names = [metric.clone(), "undeclared_metric".to_string()];
            names.sort();
            let ms: Vec<String> = names.iter().map(|n| metric_json(n)).collect();
            std::fs::write(&path, doc(&case_id, "passed", &ms))
        }
        "passed-nonzero-exit" => {
            exit = 3;
            std::fs::write(&path, doc(&case_id, "passed", &[metric_json(&metric)]))
        }
        other => usage(&format!("unknown case-result kind {other:?}")),
    }
    .unwrap_or_else(|e| {
        eprintln!("qual-fixture: failed to write {path}: {e}");
        std::process::exit(1)
    });
    std::process::exit(exit);
}

/// `deny-syscalls NAME[,NAME...] -- CMD...`: installs a seccomp filter that makes the named
/// system calls fail with `EPERM` (`unshare`, `seccomp`, `mount_setattr`, `mount`,
/// `open_tree`), then
/// executes CMD — a kernel that lacks (or forbids) those mechanisms, for refusal tests.
fn deny_syscalls(args: &[String]) {
    use std::os::unix::process::CommandExt;
    let names = args
        .get(1)
        .unwrap_or_else(|| usage("deny-syscalls needs NAMES"));
    let split = args
        .iter()
        .position(|a| a == "--")
        .unwrap_or_else(|| usage("deny-syscalls needs `--` before the command"));
    let cmd = &args[split + 1..];
    if cmd.is_empty() {
        usage("deny-syscalls needs a command");
    }
    let mut rules = std::collections::BTreeMap::new();
    for n in names.split(',') {
        let nr = match n {
            "unshare" => libc::SYS_unshare,
            "seccomp" => libc::SYS_seccomp,
            "mount_setattr" => libc::SYS_mount_setattr,
            "mount" => libc::SYS_mount,
            "open_tree" => libc::SYS_open_tree,
            other => usage(&format!("deny-syscalls: unknown system call {other}")),
        };
        rules.insert(nr, Vec::new());
    }
    let filter: seccompiler::BpfProgram = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH
            .try_into()
            .expect("supported architecture"),
    )
    .and_then(|f| f.try_into())
    .expect("filter compiles");
    seccompiler::apply_filter(&filter).expect("the filter installs");
    let e = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("qual-fixture: failed to execute {}: {e}", cmd[0]);
    std::process::exit(127);
}

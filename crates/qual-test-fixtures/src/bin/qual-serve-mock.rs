//! `qual-serve-mock`: the mock server as a standalone binary for qual-serve's integration
//! tests and benchmark (found with `qual_test_fixtures::fixture_binary`) (the product exposes the same server as `kiln-qual mock-server`).
//! Flags are those of `kiln-qual mock-server`; the bound port is printed on stdout.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match qual_serve::mock::parse_flags(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qual-serve-mock: failed to parse flags: {e}");
            std::process::exit(2);
        }
    };
    let r = qual_serve::mock::run_blocking(cfg, |port| {
        println!("listening on 127.0.0.1:{port}");
        eprintln!("mock-server: listening on 127.0.0.1:{port}");
    });
    if let Err(e) = r {
        eprintln!("qual-serve-mock: failed to serve: {e}");
        std::process::exit(1);
    }
}

//! Fleet plan: strict parse + every plan rule (keys, ids, hosts, OpenSSH keys, Slurm names,
//! labels) never panic, and a plan that passes names only known hosts.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = qual_json::from_slice(data) {
        if let Ok(plan) = qual_fleet::plan::parse(&v) {
            for t in &plan.targets {
                assert!(plan.host(&t.host_id).is_some());
            }
        }
    }
});

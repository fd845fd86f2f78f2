//! `kiln-qual campaign`, `campaign verify`, `receipt check` on campaign receipts and
//! `runtime-manifest`, end to end through the binary against an owned `kiln-qual mock-server`.

use crate::common::{self, free_port};
use assert_cmd::Command;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

fn recipe(dir: &Path, port: u16) {
    common::mock_launch_recipe(
        &dir.join("launch.json"),
        "cli-campaign-mock",
        BIN,
        port,
        &["--itl-ms", "0.2"],
        serde_json::Value::Null,
    );
}

#[test]
fn campaign_verifies_and_its_receipts_pass_receipt_check() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    recipe(dir, free_port());
    // The out dir does not exist yet: the campaign creates it (its parent exists).
    let out = dir.join("out");
    let model = common::stand_in_model(dir);
    let args = |engine: &str| {
        vec![
            "campaign".to_string(),
            "--engine".into(),
            engine.into(),
            "--launch".into(),
            dir.join("launch.json").display().to_string(),
            "--campaign-id".into(),
            "cli-campaign".into(),
            "--prompt-set-id".into(),
            "cli-prompts".into(),
            "--profiles".into(),
            "mixed,greedy-short".into(),
            "--sizes".into(),
            "1,3".into(),
            "--repeats".into(),
            "2".into(),
            "--max-tokens".into(),
            "4".into(),
            "--memory-limit-bytes".into(),
            "1099511627776".into(),
            "--memory-source".into(),
            "process-tree".into(),
            "--memory-sample-ms".into(),
            "1".into(),
            "--output-evidence".into(),
            "full".into(),
            "--out-dir".into(),
            out.display().to_string(),
            "--model-path".into(),
            model.display().to_string(),
        ]
    };
    let mut first = args("mock");
    first.extend([
        "--result".into(),
        dir.join("case.json").display().to_string(),
    ]);
    Command::new(BIN)
        .args(&first)
        .current_dir(dir)
        .assert()
        .code(0)
        .stderr(predicates::str::contains("campaign passed"));
    let case: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    assert_eq!(case["status"], "passed");
    assert!(case["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "greedy-short.c003.output_tokens_per_s"));
    Command::new(BIN)
        .args(["campaign", "verify"])
        .arg(&out)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("OK campaign verifies"));
    let receipts = [
        out.join("greedy-short.mock.json"),
        out.join("mixed.mock.json"),
    ];
    Command::new(BIN)
        .args(["receipt", "check"])
        .args(&receipts)
        .assert()
        .code(0);
    // A second engine paired with the first.
    let mut second = args("mock-b");
    second.extend([
        "--reference-dir".into(),
        out.display().to_string(),
        "--reference-engine".into(),
        "mock".into(),
    ]);
    Command::new(BIN)
        .args(&second)
        .current_dir(dir)
        .assert()
        .code(0);
    Command::new(BIN)
        .args(["campaign", "verify", "--engine", "mock-b"])
        .arg(&out)
        .assert()
        .code(0);
    // `compare` pairs two campaign receipts.
    Command::new(BIN)
        .arg("compare")
        .arg(out.join("greedy-short.mock.json"))
        .arg(out.join("greedy-short.mock-b.json"))
        .assert()
        .code(0)
        .stdout(predicates::str::contains("MATCHED"));
    // No clobbering: the same campaign again is refused.
    Command::new(BIN)
        .args(args("mock"))
        .current_dir(dir)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("already exists"));
    // A tampered receipt fails receipt check and verify.
    let text = std::fs::read_to_string(&receipts[0]).unwrap();
    std::fs::remove_file(&receipts[0]).unwrap();
    std::fs::write(
        &receipts[0],
        text.replacen("\"repeat\": 1", "\"repeat\": 0", 1),
    )
    .unwrap();
    Command::new(BIN)
        .args(["receipt", "check"])
        .arg(&receipts[0])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("receipt_sha256"));
    Command::new(BIN)
        .args(["campaign", "verify", "--engine", "mock"])
        .arg(&out)
        .assert()
        .code(1);
}

#[test]
fn runtime_manifest_is_published_once() {
    if !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("m.json");
    let run = || {
        Command::new(BIN)
            .args([
                "runtime-manifest",
                "--python",
                "/usr/bin/python3",
                "--env",
                "OMP_NUM_THREADS=1",
                "--out",
            ])
            .arg(&out)
            .assert()
    };
    run()
        .code(0)
        .stderr(predicates::str::contains("2 identical captures"));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(m["environment"]["OMP_NUM_THREADS"], "1");
    run()
        .code(1)
        .stderr(predicates::str::contains("refusing to replace"));
}

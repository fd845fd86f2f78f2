//! `fixture_binary` finds the bins next to a test executable (as other crates' tests would).

#[test]
fn finds_the_fixture_next_to_the_test_binary() {
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_qual-fixture"));
    let found = qual_test_fixtures::fixture_binary("qual-fixture").expect("found");
    assert_eq!(found.canonicalize().unwrap(), built.canonicalize().unwrap());
    assert_eq!(
        qual_test_fixtures::fixture_binary("no-such-fixture-binary"),
        None
    );
}

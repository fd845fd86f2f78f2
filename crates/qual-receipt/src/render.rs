//! (in progress)

/// Placeholder until the renderer lands.
pub fn receipt_summary(_v: &qual_json::Value) -> String {
    String::new()
}

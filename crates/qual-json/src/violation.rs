//! The one violation type of every document validator: where (a JSON pointer, or the dotted
//! path a document kind's original messages use) and what is wrong, and a collector.
//!
//! [`Violation`] serializes as `{"pointer": …, "message": …}` and displays as
//! `<pointer>: <message>` (just the message at the root). A kind whose reports were spelled
//! differently keeps its bytes through the adapters here rather than a type of its own:
//! [`Dotted`] displays `<path> <message>` and [`serialize_dotted`] writes
//! `{"message": …, "path": …}` (the receipt validator's form, whose `pointer` holds a dotted
//! path such as `receipt.results[0].id`).

use crate::keys::{KeyDiff, Phrasing};
use std::fmt;

/// One broken rule of a document.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// Where: a JSON pointer (`""` is the root), or the document kind's dotted path.
    pub pointer: String,
    /// What is wrong, reading after the location.
    pub message: String,
}

impl Violation {
    /// A violation at `pointer`.
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

/// A [`Violation`] whose location is a dotted path, displayed `<path> <message>` (just the
/// message for an empty path).
pub struct Dotted<'a>(pub &'a Violation);

impl fmt::Display for Dotted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.pointer.is_empty() {
            f.write_str(&self.0.message)
        } else {
            write!(f, "{} {}", self.0.pointer, self.0.message)
        }
    }
}

impl serde::Serialize for Dotted<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Violation", 2)?;
        st.serialize_field("message", &self.0.message)?;
        st.serialize_field("path", &self.0.pointer)?;
        st.end()
    }
}

/// `#[serde(serialize_with = "qual_json::violation::serialize_dotted")]` for a list of
/// violations whose locations are dotted paths: each as `{"message": …, "path": …}`.
pub fn serialize_dotted<S: serde::Serializer>(v: &[Violation], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(Dotted))
}

/// Escapes one JSON pointer reference token (`~` → `~0`, `/` → `~1`).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Collects violations in the order they are found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// An empty collector.
    pub fn new() -> Violations {
        Violations(Vec::new())
    }

    /// Records one violation.
    pub fn push(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.0.push(Violation::new(pointer, message));
    }

    /// Records the closed-object findings of `diff` at `pointer`, phrased by `p`.
    pub fn keys(&mut self, pointer: &str, diff: &KeyDiff<'_, '_>, p: &Phrasing) {
        for m in diff.messages(p) {
            self.push(pointer, m);
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many were recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The violations so far.
    pub fn as_slice(&self) -> &[Violation] {
        &self.0
    }

    /// The violations, in order.
    pub fn into_vec(self) -> Vec<Violation> {
        self.0
    }

    /// `Ok(ok)` when nothing was recorded, else every violation.
    pub fn finish<T>(self, ok: T) -> Result<T, Vec<Violation>> {
        if self.0.is_empty() {
            Ok(ok)
        } else {
            Err(self.0)
        }
    }
}

impl Extend<Violation> for Violations {
    fn extend<I: IntoIterator<Item = Violation>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl IntoIterator for Violations {
    type Item = Violation;
    type IntoIter = std::vec::IntoIter<Violation>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_and_dotted_forms_keep_their_spelling() {
        let v = Violation::new("/a~1b", "must be a string");
        assert_eq!(v.to_string(), "/a~1b: must be a string");
        assert_eq!(Violation::new("", "bad").to_string(), "bad");
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"pointer":"/a~1b","message":"must be a string"}"#
        );
        let d = Violation::new("receipt.results[0].id", "must be a string");
        assert_eq!(
            Dotted(&d).to_string(),
            "receipt.results[0].id must be a string"
        );
        assert_eq!(
            serde_json::to_string(&Dotted(&d)).unwrap(),
            r#"{"message":"must be a string","path":"receipt.results[0].id"}"#
        );
        assert_eq!(pointer_token("a/b~c"), "a~1b~0c");
        let mut c = Violations::new();
        assert!(c.clone().finish(()).is_ok());
        c.push("/x", "bad");
        assert_eq!(c.len(), 1);
        assert_eq!(c.finish(()).unwrap_err()[0].pointer, "/x");
    }
}

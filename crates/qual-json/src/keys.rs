//! The closed-object check: which keys of an object are missing and which are unknown, and
//! how each document kind phrases them.
//!
//! Every validator of a closed record asks [`ClosedKeys`] (the required keys, optionally a
//! wider set of allowed ones, and the order each list is reported in) for a [`KeyDiff`], and
//! turns it into messages with its document kind's [`Phrasing`]: the messages of the
//! original implementations differ (`missing keys: a, b`, `lacks keys: a`,
//! `missing required keys: ["a"]`, one `unknown member "k"` per key…) and stay byte-identical.

use crate::show;
use crate::Object;

/// The order a list of keys is reported in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Byte order of the key names.
    Sorted,
    /// As declared: the order of the required keys for missing ones, the document's order for
    /// unknown ones.
    Declared,
}

/// The keys an object must have and may have.
#[derive(Clone, Copy, Debug)]
pub struct ClosedKeys<'k> {
    required: &'k [&'k str],
    allowed: &'k [&'k str],
    missing_order: Order,
    unknown_order: Order,
}

impl<'k> ClosedKeys<'k> {
    /// Exactly `keys`: all required, nothing else allowed; both lists sorted.
    pub const fn new(keys: &'k [&'k str]) -> ClosedKeys<'k> {
        ClosedKeys {
            required: keys,
            allowed: keys,
            missing_order: Order::Sorted,
            unknown_order: Order::Sorted,
        }
    }

    /// `required` must be present; `allowed` (which should include `required`) may be.
    pub const fn with_optional(required: &'k [&'k str], allowed: &'k [&'k str]) -> Self {
        ClosedKeys {
            required,
            allowed,
            missing_order: Order::Sorted,
            unknown_order: Order::Sorted,
        }
    }

    /// The order missing keys are reported in.
    pub const fn missing_order(mut self, order: Order) -> Self {
        self.missing_order = order;
        self
    }

    /// The order unknown keys are reported in.
    pub const fn unknown_order(mut self, order: Order) -> Self {
        self.unknown_order = order;
        self
    }

    /// The required keys `o` lacks.
    pub fn missing(&self, o: &Object) -> Vec<&'k str> {
        let mut missing: Vec<&'k str> = self
            .required
            .iter()
            .copied()
            .filter(|k| !o.contains_key(k))
            .collect();
        if self.missing_order == Order::Sorted {
            missing.sort_unstable();
        }
        missing
    }

    /// The keys of `o` that are not allowed.
    pub fn unknown<'o>(&self, o: &'o Object) -> Vec<&'o str> {
        let mut unknown: Vec<&'o str> = o
            .keys()
            .map(String::as_str)
            .filter(|k| !self.allowed.contains(k))
            .collect();
        if self.unknown_order == Order::Sorted {
            unknown.sort_unstable();
        }
        unknown
    }

    /// Both lists.
    pub fn check<'o>(&self, o: &'o Object) -> KeyDiff<'k, 'o> {
        KeyDiff {
            missing: self.missing(o),
            unknown: self.unknown(o),
        }
    }
}

/// What [`ClosedKeys::check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDiff<'k, 'o> {
    /// Required keys that are absent.
    pub missing: Vec<&'k str>,
    /// Present keys that are not allowed.
    pub unknown: Vec<&'o str>,
}

impl KeyDiff<'_, '_> {
    /// Whether the object has exactly an allowed key set.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unknown.is_empty()
    }

    /// The messages in `p`'s phrasing (none for an empty list).
    pub fn messages(&self, p: &Phrasing) -> Vec<String> {
        let missing = p.render(p.missing, &self.missing);
        let unknown = p.render(p.unknown, &self.unknown);
        if p.unknown_first {
            unknown.into_iter().chain(missing).collect()
        } else {
            missing.into_iter().chain(unknown).collect()
        }
    }
}

/// How a list of keys is spelled in a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyList {
    /// `a, b` (the names as they are).
    Plain,
    /// `["a", "b"]` ([`show::list`]).
    Json,
    /// One message per key, the key as a JSON string (`"a"`, [`show::quote`]).
    EachQuoted,
}

/// A document kind's phrasing of missing and unknown keys: templates in which `{}` stands
/// for the list (or, with [`KeyList::EachQuoted`], for one key).
#[derive(Clone, Copy, Debug)]
pub struct Phrasing {
    /// For missing keys, e.g. `missing keys: {}`.
    pub missing: &'static str,
    /// For unknown keys, e.g. `has unknown keys: {}`.
    pub unknown: &'static str,
    /// How the keys are spelled.
    pub list: KeyList,
    /// Unknown keys are reported before missing ones.
    pub unknown_first: bool,
}

/// `missing keys: a, b` / `has unknown keys: c` (the receipt and contract validators).
pub const MISSING_UNKNOWN: Phrasing = Phrasing {
    missing: "missing keys: {}",
    unknown: "has unknown keys: {}",
    list: KeyList::Plain,
    unknown_first: false,
};

impl Phrasing {
    fn render<S: AsRef<str>>(&self, template: &str, keys: &[S]) -> Vec<String> {
        if keys.is_empty() {
            return Vec::new();
        }
        let fill = |s: &str| template.replacen("{}", s, 1);
        match self.list {
            KeyList::Plain => {
                let names: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
                vec![fill(&names.join(", "))]
            }
            KeyList::Json => vec![fill(&show::list(keys))],
            KeyList::EachQuoted => keys
                .iter()
                .map(|k| fill(&show::quote(k.as_ref())))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    fn obj(text: &str) -> Object {
        match crate::from_str(text).unwrap() {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn lists_follow_the_requested_order_and_phrasing() {
        let o = obj(r#"{"z":1,"b":2,"y":3}"#);
        let keys = ["b", "d", "c"];
        let sorted = ClosedKeys::new(&keys).check(&o);
        assert_eq!(sorted.missing, ["c", "d"]);
        assert_eq!(sorted.unknown, ["y", "z"]);
        assert_eq!(
            sorted.messages(&MISSING_UNKNOWN),
            ["missing keys: c, d", "has unknown keys: y, z"]
        );
        let declared = ClosedKeys::new(&keys)
            .missing_order(Order::Declared)
            .unknown_order(Order::Declared)
            .check(&o);
        assert_eq!(declared.missing, ["d", "c"]);
        assert_eq!(declared.unknown, ["z", "y"]);
        let each = Phrasing {
            missing: "missing member {}",
            unknown: "unknown member {}",
            list: KeyList::EachQuoted,
            unknown_first: true,
        };
        assert_eq!(
            declared.messages(&each),
            [
                "unknown member \"z\"",
                "unknown member \"y\"",
                "missing member \"d\"",
                "missing member \"c\""
            ]
        );
        let json = Phrasing {
            list: KeyList::Json,
            ..MISSING_UNKNOWN
        };
        assert_eq!(sorted.messages(&json)[0], "missing keys: [\"c\", \"d\"]");
        let optional = ClosedKeys::with_optional(&["b"], &["b", "y", "z"]).check(&o);
        assert!(optional.is_empty());
    }
}

//! The manifests' YAML: a small writer for a tree of maps, lists and scalars, where
//! every string is emitted as a JSON string, which is a valid YAML double-quoted scalar,
//! so no value can change meaning (no crate needed). Apart so the Jobs' files hold only
//! what goes into a manifest.

use serde_json::Value;

/// `v` as YAML: block maps and lists, every string a JSON (so YAML double-quoted) scalar.
pub fn yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, 0, &mut out);
    out
}

/// A key as written: plain when it is a simple name (as Kubernetes' keys are), else quoted.
fn yaml_key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
    if plain {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) if m.is_empty() => Some("{}".into()),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn write_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                let key = yaml_key(k);
                match scalar(val) {
                    Some(s) => out.push_str(&format!("{pad}{key}: {s}\n")),
                    None => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_yaml(val, indent + 2, out);
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                match scalar(item) {
                    Some(s) => out.push_str(&format!("{pad}- {s}\n")),
                    None => {
                        // The item's first line goes after the dash; the rest keep its indent.
                        let mut inner = String::new();
                        write_yaml(item, indent + 2, &mut inner);
                        let inner = inner.trim_start();
                        out.push_str(&format!("{pad}- {inner}"));
                    }
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other).unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_nests_maps_in_lists() {
        let v = json!({"a": [{"b": 1, "c": {"d": "x: y"}}, "s"], "e": {}, "f g": true});
        assert_eq!(
            yaml(&v),
            "a:\n  - b: 1\n    c:\n      d: \"x: y\"\n  - \"s\"\ne: {}\n\"f g\": true\n"
        );
    }
}

//! Splitting a rule's text: the seven header fields, then `keyword[:value];` options, and
//! the string forms inside option values (quoted strings, content with `|hex|`).

/// A rule's text cut into header fields and options. Errors are (field or keyword, message).
#[derive(Debug)]
pub(crate) struct RawRule<'a> {
    pub header: Vec<&'a str>,
    pub options: Vec<(&'a str, Option<&'a str>)>,
}

pub(crate) type LexError = (String, String);

fn err(k: &str, m: impl Into<String>) -> LexError {
    (k.to_string(), m.into())
}

/// Cuts `text` (one rule, without its line ending) into its header fields and options.
pub(crate) fn split_rule(text: &str) -> Result<RawRule<'_>, LexError> {
    let open = text
        .find('(')
        .ok_or_else(|| err("options", "no '(' opening the options"))?;
    let head = &text[..open];
    let rest = text[open + 1..].trim_end();
    let body = rest
        .strip_suffix(')')
        .ok_or_else(|| err("options", "the options do not end with ')'"))?;
    let header = split_header(head)?;
    if header.len() != 7 {
        return Err(err(
            "header",
            format!(
                "expected 7 fields (action proto src sport dir dst dport), found {}",
                header.len()
            ),
        ));
    }
    Ok(RawRule {
        header,
        options: split_options(body)?,
    })
}

/// Whitespace-separated fields; a `[...]` list may contain spaces.
fn split_header(head: &str) -> Result<Vec<&str>, LexError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = None;
    for (i, c) in head.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(err("header", "']' without '['"));
                }
            }
            _ => {}
        }
        if c.is_whitespace() && depth == 0 {
            if let Some(s) = start.take() {
                out.push(&head[s..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if depth != 0 {
        return Err(err("header", "'[' without ']'"));
    }
    if let Some(s) = start {
        out.push(&head[s..]);
    }
    Ok(out)
}

/// `keyword;` or `keyword:value;` pairs; a value ends at the first `;` not escaped by `\`.
fn split_options(body: &str) -> Result<Vec<(&str, Option<&str>)>, LexError> {
    let mut out = Vec::new();
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let ks = i;
        while i < b.len() && b[i] != b':' && b[i] != b';' {
            i += 1;
        }
        let key = body[ks..i].trim();
        if key.is_empty() {
            return Err(err(
                "options",
                format!("empty keyword at byte {ks} of the options"),
            ));
        }
        if i >= b.len() {
            return Err(err(key, "option not terminated by ';'"));
        }
        if b[i] == b';' {
            out.push((key, None));
            i += 1;
            continue;
        }
        i += 1;
        let vs = i;
        while i < b.len() && b[i] != b';' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        if i >= b.len() {
            return Err(err(key, "option not terminated by ';'"));
        }
        out.push((key, Some(body[vs..i].trim())));
        i += 1;
    }
    Ok(out)
}

fn unescape(key: &str, s: &str) -> Result<Vec<u8>, LexError> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.bytes();
    while let Some(c) = it.next() {
        if c == b'\\' {
            match it.next() {
                Some(e @ (b'"' | b'\\' | b';' | b':')) => out.push(e),
                Some(e) => {
                    return Err(err(key, format!("invalid escape '\\{}'", e as char)));
                }
                None => return Err(err(key, "'\\' at the end of the value")),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// A content pattern: optional `!`, a quoted string with `|hex bytes|` sections and escapes.
/// Returns (negated, bytes).
pub(crate) fn content_bytes(key: &str, v: &str) -> Result<(bool, Vec<u8>), LexError> {
    let mut v = v.trim();
    let negated = v.starts_with('!');
    if negated {
        v = v[1..].trim_start();
    }
    if !(v.len() >= 2 && v.starts_with('"') && v.ends_with('"')) {
        return Err(err(key, "the pattern must be a quoted string"));
    }
    let inner = &v[1..v.len() - 1];
    let mut out = Vec::new();
    let mut text = String::new();
    let mut in_hex = false;
    let mut hex_digits = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if in_hex {
            match c {
                '|' => {
                    if hex_digits.len() % 2 != 0 {
                        return Err(err(key, "odd number of hex digits in |...|"));
                    }
                    for pair in hex_digits.as_bytes().chunks(2) {
                        let s = std::str::from_utf8(pair).unwrap_or("");
                        out.push(
                            u8::from_str_radix(s, 16)
                                .map_err(|_| err(key, format!("bad hex byte '{s}'")))?,
                        );
                    }
                    hex_digits.clear();
                    in_hex = false;
                }
                c if c.is_ascii_hexdigit() => hex_digits.push(c),
                ' ' | '\t' => {}
                c => return Err(err(key, format!("'{c}' inside |hex|"))),
            }
        } else if c == '|' {
            out.extend(unescape(key, &text)?);
            text.clear();
            in_hex = true;
        } else if c == '"' {
            return Err(err(key, "unescaped '\"' inside the pattern"));
        } else {
            text.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    text.push(n);
                }
            }
        }
    }
    if in_hex {
        return Err(err(key, "'|' opening hex bytes is not closed"));
    }
    out.extend(unescape(key, &text)?);
    if out.is_empty() {
        return Err(err(key, "empty pattern"));
    }
    Ok((negated, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_options_split() {
        let r = split_rule(
            r#"alert tcp [1.2.3.4, 5.6.7.8] any -> $HOME_NET 80 (msg:"a\;b"; nocase; sid:1;)"#,
        )
        .unwrap();
        assert_eq!(r.header[2], "[1.2.3.4, 5.6.7.8]");
        assert_eq!(r.header[6], "80");
        assert_eq!(r.options[0], ("msg", Some(r#""a\;b""#)));
        assert_eq!(r.options[1], ("nocase", None));
        assert_eq!(r.options[2], ("sid", Some("1")));
    }

    #[test]
    fn split_errors_name_the_part() {
        assert_eq!(
            split_rule("alert tcp any any -> any any").unwrap_err().0,
            "options"
        );
        assert_eq!(
            split_rule("alert tcp any any -> any (sid:1;)")
                .unwrap_err()
                .0,
            "header"
        );
        assert_eq!(
            split_rule("alert tcp any any -> any any (sid:1)")
                .unwrap_err()
                .0,
            "sid"
        );
        assert_eq!(
            split_rule("alert tcp [any any -> any any (sid:1;)")
                .unwrap_err()
                .0,
            "header"
        );
    }

    #[test]
    fn content_hex_and_escapes() {
        let (neg, b) = content_bytes("content", r#"!"A|42 43|\"\;\\|0d0a|""#).unwrap();
        assert!(neg);
        assert_eq!(b, b"ABC\";\\\r\n");
        assert!(content_bytes("content", r#""|4|""#).is_err());
        assert!(content_bytes("content", r#""|41"#).is_err());
        assert!(content_bytes("content", r#""|zz|""#).is_err());
        assert!(content_bytes("content", r#""\x""#).is_err());
        assert!(content_bytes("content", "abc").is_err());
        assert!(content_bytes("content", r#""""#).is_err());
    }
}

//! Where a serde error of a config is: the key it is about and the allowed range of the
//! integer type it names (serde reports the value, not the key).

/// The key a serde error at `line`:`column` (1-based) is about: the last `key:` on that line
/// before the column (serde itself reports the value, not the key). Empty when none.
pub(super) fn key_at(text: &str, line: u32, column: u32) -> String {
    let Some(l) = text.lines().nth((line as usize).saturating_sub(1)) else {
        return String::new();
    };
    // A location at a key itself (`{ key: value }`, where some errors point at the entry's
    // start): that key.
    let here: String = l.chars().skip(column.saturating_sub(1) as usize).collect();
    let word_len = here
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(here.len());
    // (A YAML key's colon is followed by a space or the line's end: `aa:bb:..` is a value.)
    let rest = &here[word_len..];
    let keyed = rest == ":" || rest.starts_with(": ");
    if word_len > 0 && keyed && !here.starts_with(|c: char| c.is_ascii_digit()) {
        return here[..word_len].to_string();
    }
    let upto: String = l.chars().take(column.saturating_sub(1) as usize).collect();
    let Some(colon) = upto.rfind(':') else {
        // Some refusals point at the key itself or at its colon (a value refused by a
        // hand-written deserializer such as `steering.offload`'s, or an empty value): the key
        // is the word before the first colon from there on.
        let skip = column.saturating_sub(1) as usize;
        let colon = l
            .char_indices()
            .find(|&(i, c)| c == ':' && l[..i].chars().count() >= skip);
        let Some((at, _)) = colon else {
            return String::new();
        };
        let head = l[..at].trim_end();
        let start = head
            .char_indices()
            .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        return head[start..].to_string();
    };
    let head = &upto[..colon];
    // The char after the last one that cannot be part of a key (which may be several bytes
    // long: a byte offset past it, not `+ 1`).
    let start = head
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    head[start..].to_string()
}

/// The allowed range of the integer type a serde message names (`invalid u32`, `expected u16`).
pub(super) fn int_range(message: &str) -> Option<&'static str> {
    let names = |w: &str| {
        message
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|t| t == w)
    };
    [
        ("u8", "0 ..= 255"),
        ("u16", "0 ..= 65535"),
        ("u32", "0 ..= 4294967295"),
        ("u64", "0 ..= 18446744073709551615"),
        ("usize", "0 ..= 18446744073709551615"),
    ]
    .iter()
    .find(|(k, _)| names(k))
    .map(|(_, r)| *r)
}

//! The `pcre` keyword: `[!]"/pattern/flags"`, Suricata's flag letters, and its DFA tables.

use super::lex::LexError;
use super::{Buffer, Detect, Pcre, Rule};
use std::sync::Arc;

type Res<T> = Result<T, LexError>;

fn err<T>(k: &str, m: impl Into<String>) -> Res<T> {
    Err((k.to_string(), m.into()))
}

/// The buffer a Suricata pcre flag names.
fn flag_buffer(c: char) -> Option<Buffer> {
    Some(match c {
        'U' => Buffer::HttpUri,
        'I' => Buffer::HttpRawUri,
        'M' => Buffer::HttpMethod,
        'H' => Buffer::HttpHeader,
        'D' => Buffer::HttpRawHeader,
        'V' => Buffer::HttpUserAgent,
        'W' => Buffer::HttpHost,
        'Z' => Buffer::HttpRawHost,
        'C' => Buffer::HttpCookie,
        'P' => Buffer::HttpClientBody,
        'Q' => Buffer::FileData,
        'S' => Buffer::HttpStatCode,
        'Y' => Buffer::HttpStatMsg,
        _ => return None,
    })
}

/// pcre: `[!]"/re/flags"`. Returns the buffer its flags name (if any) and the keyword (its
/// tables are built by [`compile_pcres`] once the rule is read).
pub(super) fn pcre(k: &str, s: &str) -> Res<(Option<Buffer>, Option<Detect>)> {
    let s = s.trim();
    let negated = s.starts_with('!');
    let body = s.trim_start_matches('!').trim();
    let body = body
        .strip_prefix('"')
        .and_then(|b| b.strip_suffix('"'))
        .ok_or_else(|| (k.to_string(), "not a quoted string".to_string()))?;
    let end = body.rfind('/').filter(|&e| e > 0 && body.starts_with('/'));
    let Some(end) = end else {
        return err(k, "not of the form \"/regex/flags\"");
    };
    let flags = &body[end + 1..];
    let mut buf = None;
    for c in flags.chars() {
        if let Some(b) = flag_buffer(c) {
            if buf.is_some() {
                return err(k, "two buffer flags (Suricata allows one)");
            }
            buf = Some(b);
        } else if !"ismxAEGROB".contains(c) {
            return err(k, format!("unknown regex modifier '{c}'"));
        }
    }
    let pattern = &body[1..end];
    if buf == Some(Buffer::HttpHost)
        && !flags.contains('i')
        && pattern.bytes().any(|b| b.is_ascii_uppercase())
    {
        return err(
            k,
            "an uppercase character in a W (lowercased host) pattern without i",
        );
    }
    let d = Detect::Pcre(Pcre {
        pattern: pattern.to_string(),
        flags: flags.to_string(),
        relative: flags.contains('R'),
        negated,
        compiled: Err("not compiled".into()),
    });
    Ok((buf, Some(d)))
}

/// Builds every pcre's tables: the reverse one too when a later keyword of its buffer is
/// relative (it may then be retried from its match start + 1).
pub(super) fn compile_pcres(rule: &mut Rule) {
    for i in 0..rule.detect.len() {
        let buf = rule.detect[i].0;
        let need_start = rule.detect[i + 1..]
            .iter()
            .any(|(b, d)| *b == buf && d.is_relative());
        if let Detect::Pcre(p) = &mut rule.detect[i].1 {
            p.compiled = crate::pcre::compile(p.pattern.as_bytes(), &p.flags, need_start)
                .map(Arc::new)
                .map_err(|s| s.0);
        }
    }
}

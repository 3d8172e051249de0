//! PCRE2 pattern syntax (8-bit code units, no UTF, the default "C" character tables, LF
//! newline) parsed into a small tree of byte sets, anchors, concatenations, alternations and
//! repeats. Everything that has no finite-automaton form with PCRE's exact meaning is refused
//! with its reason (back-references, look-around, atomic groups, possessive quantifiers,
//! recursion, conditionals, callouts, verbs, Unicode properties, `\R`, `\G`, `\K`), and so is
//! every construct whose reading differs between PCRE2 versions (`{,n}`).

/// A set of bytes, 256 bits.
pub type Set = [u64; 4];

pub fn set_has(s: &Set, b: u8) -> bool {
    s[usize::from(b >> 6)] >> (b & 63) & 1 != 0
}

pub fn set_add(s: &mut Set, b: u8) {
    s[usize::from(b >> 6)] |= 1 << (b & 63);
}

fn set_put(s: &mut Set, b: u8, on: bool) {
    if on {
        set_add(s, b);
    } else {
        s[usize::from(b >> 6)] &= !(1 << (b & 63));
    }
}

fn set_range(lo: u8, hi: u8) -> Set {
    let mut s = [0; 4];
    for b in lo..=hi {
        set_add(&mut s, b);
    }
    s
}

fn set_of(bytes: &[u8]) -> Set {
    let mut s = [0; 4];
    bytes.iter().for_each(|&b| set_add(&mut s, b));
    s
}

fn union(a: &mut Set, b: &Set) {
    (0..4).for_each(|k| a[k] |= b[k]);
}

fn not(s: &Set) -> Set {
    [!s[0], !s[1], !s[2], !s[3]]
}

/// Adds the other case of every ASCII letter in `s` (PCRE's caseless matching without UTF).
fn fold(s: &mut Set) {
    for b in b'A'..=b'Z' {
        let on = set_has(s, b) || set_has(s, b + 32);
        set_put(s, b, on);
        set_put(s, b + 32, on);
    }
}

pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Zero-width assertions, as PCRE defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// `\A`, `^` without `m`: the subject start.
    Start,
    /// `\z`, `$` with `E` (without `m`): the subject end.
    End,
    /// `^` with `m`: the start, or after a newline that is not the subject's last byte.
    LineStart,
    /// `$` with `m`: the end, or before any newline.
    LineEnd,
    /// `\Z`, `$` without `m` and `E`: the end, or before a newline that ends the subject.
    EndOrFinalNl,
    Word,
    NotWord,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ast {
    Empty,
    /// One byte of the set.
    Set(Set),
    Look(Anchor),
    Concat(Vec<Ast>),
    Alt(Vec<Ast>),
    Repeat {
        min: u32,
        max: Option<u32>,
        greedy: bool,
        sub: Box<Ast>,
    },
}

impl Ast {
    /// The fewest bytes a match consumes.
    pub fn min_len(&self) -> u64 {
        match self {
            Ast::Empty | Ast::Look(_) => 0,
            Ast::Set(_) => 1,
            Ast::Concat(v) => v.iter().map(Ast::min_len).sum(),
            Ast::Alt(v) => v.iter().map(Ast::min_len).min().unwrap_or(0),
            Ast::Repeat { min, sub, .. } => u64::from(*min).saturating_mul(sub.min_len()),
        }
    }
}

/// The options a pattern starts with (its `/flags`), changed by `(?imsxU)` groups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub caseless: bool,
    pub multiline: bool,
    pub dotall: bool,
    pub extended: bool,
    pub ungreedy: bool,
    /// `E`: `$` matches only at the very end (ignored with `m`, as PCRE does).
    pub dollar_endonly: bool,
}

/// Why a pattern has no DFA form (the text after `pcre: ` in a skip reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

type Res<T> = Result<T, Skip>;

fn skip<T>(why: impl Into<String>) -> Res<T> {
    Err(Skip(why.into()))
}

/// PCRE's default limit on nested parentheses.
const MAX_DEPTH: u32 = 250;
/// PCRE's largest repeat count.
const MAX_REPEAT: u32 = 65535;

pub fn parse(pattern: &[u8], flags: Flags) -> Res<Ast> {
    let mut p = Parser {
        p: pattern,
        i: 0,
        depth: 0,
    };
    let mut f = flags;
    let ast = p.alt(&mut f)?;
    if p.i < p.p.len() {
        return skip("syntax: unmatched )");
    }
    Ok(ast)
}

struct Parser<'a> {
    p: &'a [u8],
    i: usize,
    depth: u32,
}

enum Esc {
    Set(Set),
    Byte(u8),
    Look(Anchor),
    /// `\E` without `\Q`, ignored.
    Nothing,
    /// `\Q...\E`: literal bytes.
    Quoted(Vec<u8>),
}

fn x_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.p.get(self.i).copied()
    }
    fn at(&self, k: usize) -> Option<u8> {
        self.p.get(self.i + k).copied()
    }
    fn starts(&self, s: &[u8]) -> bool {
        self.p[self.i..].starts_with(s)
    }

    /// Skips `x`-mode white space and `#` comments.
    fn skip_x(&mut self, f: &Flags) {
        if !f.extended {
            return;
        }
        while let Some(c) = self.peek() {
            if x_space(c) {
                self.i += 1;
            } else if c == b'#' {
                while self.peek().is_some_and(|c| c != b'\n') {
                    self.i += 1;
                }
            } else {
                break;
            }
        }
    }

    fn alt(&mut self, f: &mut Flags) -> Res<Ast> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return skip("syntax: parentheses nested too deep");
        }
        let mut branches = vec![self.concat(f)?];
        while self.peek() == Some(b'|') {
            self.i += 1;
            branches.push(self.concat(f)?);
        }
        self.depth -= 1;
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Ast::Empty)
        } else {
            Ast::Alt(branches)
        })
    }

    fn concat(&mut self, f: &mut Flags) -> Res<Ast> {
        let mut items = Vec::new();
        loop {
            self.skip_x(f);
            let Some(c) = self.peek() else { break };
            let atom = match c {
                b'|' | b')' => break,
                b'(' => match self.group(f)? {
                    Some(a) => a,
                    None => continue,
                },
                b'[' => {
                    if matches!(self.at(1), Some(b':' | b'.' | b'=')) && self.posix_end().is_some()
                    {
                        return skip("syntax: a POSIX class outside a class");
                    }
                    self.i += 1;
                    Ast::Set(self.class(f)?)
                }
                b'.' => {
                    self.i += 1;
                    let mut s = [u64::MAX; 4];
                    if !f.dotall {
                        set_put(&mut s, b'\n', false);
                    }
                    Ast::Set(s)
                }
                b'^' => {
                    self.i += 1;
                    Ast::Look(if f.multiline {
                        Anchor::LineStart
                    } else {
                        Anchor::Start
                    })
                }
                b'$' => {
                    self.i += 1;
                    Ast::Look(if f.multiline {
                        Anchor::LineEnd
                    } else if f.dollar_endonly {
                        Anchor::End
                    } else {
                        Anchor::EndOrFinalNl
                    })
                }
                b'\\' => {
                    self.i += 1;
                    match self.escape(false)? {
                        Esc::Set(s) => Ast::Set(s),
                        Esc::Byte(b) => lit(b, f),
                        Esc::Look(a) => Ast::Look(a),
                        Esc::Nothing => continue,
                        Esc::Quoted(bytes) => {
                            // A quantifier after `\Q..\E` applies to its last byte.
                            let n = bytes.len();
                            for (k, b) in bytes.into_iter().enumerate() {
                                if k + 1 < n {
                                    items.push(lit(b, f));
                                } else {
                                    let a = self.quantified(lit(b, f), f)?;
                                    items.push(a);
                                }
                            }
                            continue;
                        }
                    }
                }
                b'*' | b'+' | b'?' => return skip("syntax: quantifier without an item"),
                b'{' if self.quantifier_at(self.i)?.is_some() => {
                    return skip("syntax: quantifier without an item")
                }
                _ => {
                    self.i += 1;
                    lit(c, f)
                }
            };
            let a = self.quantified(atom, f)?;
            items.push(a);
        }
        Ok(match items.len() {
            0 => Ast::Empty,
            1 => items.pop().unwrap_or(Ast::Empty),
            _ => Ast::Concat(items),
        })
    }

    /// `{n}`, `{n,}`, `{n,m}` at `at`: (min, max, bytes); None when it is literal text.
    fn quantifier_at(&self, at: usize) -> Res<Option<(u32, Option<u32>, usize)>> {
        let s = &self.p[at..];
        if s.first() != Some(&b'{') {
            return Ok(None);
        }
        let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
        let n1 = digits(1);
        if n1 == 0 {
            // `{,n}` is a quantifier since PCRE2 10.43 and literal before.
            if s.get(1) == Some(&b',') && digits(2) > 0 {
                return skip("{,n} (read differently by PCRE2 versions)");
            }
            return Ok(None);
        }
        let num = |a: usize, n: usize| -> Res<u32> {
            let v: u64 = std::str::from_utf8(&s[a..a + n])
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(u64::MAX);
            if v > u64::from(MAX_REPEAT) {
                return skip("syntax: repeat count over 65535");
            }
            Ok(v as u32)
        };
        let min = num(1, n1)?;
        match s.get(1 + n1) {
            Some(b'}') => Ok(Some((min, Some(min), n1 + 2))),
            Some(b',') => {
                let n2 = digits(2 + n1);
                if s.get(2 + n1 + n2) != Some(&b'}') {
                    return Ok(None);
                }
                let max = if n2 == 0 {
                    None
                } else {
                    Some(num(2 + n1, n2)?)
                };
                if max.is_some_and(|m| m < min) {
                    return skip("syntax: repeat counts out of order");
                }
                Ok(Some((min, max, n1 + n2 + 3)))
            }
            _ => Ok(None),
        }
    }

    fn quantified(&mut self, atom: Ast, f: &Flags) -> Res<Ast> {
        let save = self.i;
        self.skip_x(f);
        let q = match self.peek() {
            Some(b'*') => Some((0, None, 1)),
            Some(b'+') => Some((1, None, 1)),
            Some(b'?') => Some((0, Some(1), 1)),
            Some(b'{') => self.quantifier_at(self.i)?,
            _ => None,
        };
        let Some((min, max, n)) = q else {
            self.i = save;
            return Ok(atom);
        };
        if self.i != save {
            return skip("x-mode space before a quantifier");
        }
        if matches!(atom, Ast::Look(_)) {
            return skip("a quantified assertion");
        }
        self.i += n;
        let mut lazy = false;
        match self.peek() {
            Some(b'?') => {
                lazy = true;
                self.i += 1;
            }
            Some(b'+') => return skip("possessive quantifier"),
            _ => {}
        }
        let next = self.quantifier_at(self.i)?;
        if matches!(self.peek(), Some(b'*' | b'+' | b'?')) || next.is_some() {
            return skip("syntax: a quantifier after a quantifier");
        }
        Ok(Ast::Repeat {
            min,
            max,
            greedy: lazy == f.ungreedy,
            sub: Box::new(atom),
        })
    }

    /// A group at `(`; None for an option setting such as `(?i)` (it changes `f`).
    fn group(&mut self, f: &mut Flags) -> Res<Option<Ast>> {
        self.i += 1;
        if self.peek() == Some(b'*') {
            return skip("a (*VERB) or (*assertion)");
        }
        let mut inner = *f;
        if self.peek() == Some(b'?') {
            self.i += 1;
            let Some(c) = self.peek() else {
                return skip("syntax: ( at the end");
            };
            match c {
                b'#' => {
                    while self.peek().is_some_and(|c| c != b')') {
                        self.i += 1;
                    }
                    if self.peek().is_none() {
                        return skip("syntax: unterminated comment");
                    }
                    self.i += 1;
                    return Ok(None);
                }
                b':' | b'|' => self.i += 1,
                b'>' => return skip("atomic group"),
                b'=' | b'!' => return skip("look-ahead"),
                b'<' if matches!(self.at(1), Some(b'=' | b'!')) => return skip("look-behind"),
                b'<' | b'\'' => self.group_name(if c == b'<' { b'>' } else { b'\'' })?,
                b'P' => match self.at(1) {
                    Some(b'<') => {
                        self.i += 1;
                        self.group_name(b'>')?
                    }
                    Some(b'=') => return skip("back-reference"),
                    _ => return skip("recursion"),
                },
                b'R' | b'&' | b'+' | b'0'..=b'9' => return skip("recursion"),
                b'-' if self.at(1).is_some_and(|c| c.is_ascii_digit()) => return skip("recursion"),
                b'(' => return skip("conditional group"),
                b'C' => return skip("callout"),
                _ => {
                    let mut nf = *f;
                    self.options(&mut nf)?;
                    match self.peek() {
                        Some(b')') => {
                            self.i += 1;
                            *f = nf;
                            return Ok(None);
                        }
                        Some(b':') => {
                            self.i += 1;
                            inner = nf;
                        }
                        _ => return skip("syntax: bad (? group"),
                    }
                }
            }
        }
        let a = self.alt(&mut inner)?;
        if self.peek() != Some(b')') {
            return skip("syntax: missing )");
        }
        self.i += 1;
        Ok(Some(a))
    }

    fn group_name(&mut self, close: u8) -> Res<()> {
        self.i += 1;
        let n = self.p[self.i..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if n == 0 || self.at(n) != Some(close) {
            return skip("syntax: bad group name");
        }
        self.i += n + 1;
        Ok(())
    }

    /// `imnsxUJ`, `-` before those to unset, `^` to reset; stops at `)` or `:`.
    fn options(&mut self, f: &mut Flags) -> Res<()> {
        let mut on = true;
        if self.peek() == Some(b'^') {
            self.i += 1;
            f.caseless = false;
            f.multiline = false;
            f.dotall = false;
            f.extended = false;
        }
        while let Some(c) = self.peek() {
            match c {
                b')' | b':' => return Ok(()),
                b'-' => on = false,
                b'i' => f.caseless = on,
                b'm' => f.multiline = on,
                b's' => f.dotall = on,
                b'x' => {
                    if self.at(1) == Some(b'x') {
                        return skip("(?xx)");
                    }
                    f.extended = on
                }
                b'U' => f.ungreedy = on,
                b'n' | b'J' => {}
                _ => return skip("syntax: unknown option in (?...)"),
            }
            self.i += 1;
        }
        skip("syntax: unterminated (?")
    }

    fn hex(&mut self, max: usize) -> u32 {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            let Some(d) = self.peek().and_then(|c| (c as char).to_digit(16)) else {
                break;
            };
            v = v * 16 + d;
            self.i += 1;
            n += 1;
        }
        v
    }

    /// `{digits}` in `radix` after `\x` / `\o`; a value past 0xff has no 8-bit form.
    fn braced(&mut self, radix: u32) -> Res<u8> {
        self.i += 1;
        let mut v = 0u64;
        let mut n = 0;
        while let Some(d) = self.peek().and_then(|c| (c as char).to_digit(radix)) {
            v = (v * u64::from(radix) + u64::from(d)).min(1 << 32);
            self.i += 1;
            n += 1;
        }
        if n == 0 || self.peek() != Some(b'}') {
            return skip("syntax: bad \\x{..} or \\o{..}");
        }
        self.i += 1;
        u8::try_from(v).or_else(|_| skip("a character past \\xff"))
    }

    /// After a backslash; `in_class` reads `\b` as backspace and refuses assertions.
    fn escape(&mut self, in_class: bool) -> Res<Esc> {
        let Some(c) = self.peek() else {
            return skip("syntax: \\ at the end");
        };
        self.i += 1;
        let byte = |b: u8| Ok(Esc::Byte(b));
        let set = |s: Set| Ok(Esc::Set(s));
        let digit = set_range(b'0', b'9');
        let space = set_of(b"\t\n\x0b\x0c\r ");
        let mut word = set_range(b'0', b'9');
        union(&mut word, &set_range(b'A', b'Z'));
        union(&mut word, &set_range(b'a', b'z'));
        set_add(&mut word, b'_');
        let hspace = set_of(b"\t \xa0");
        let vspace = set_of(b"\n\x0b\x0c\r\x85");
        match c {
            b'a' => byte(0x07),
            b'e' => byte(0x1b),
            b'f' => byte(0x0c),
            b'n' => byte(b'\n'),
            b'r' => byte(b'\r'),
            b't' => byte(b'\t'),
            b'd' => set(digit),
            b'D' => set(not(&digit)),
            b's' => set(space),
            b'S' => set(not(&space)),
            b'w' => set(word),
            b'W' => set(not(&word)),
            b'h' => set(hspace),
            b'H' => set(not(&hspace)),
            b'v' => set(vspace),
            b'V' => set(not(&vspace)),
            b'b' if in_class => byte(0x08),
            b'N' if !in_class && self.peek() != Some(b'{') => set(not(&set_of(b"\n"))),
            b'C' if !in_class => set([u64::MAX; 4]),
            b'b' => Ok(Esc::Look(Anchor::Word)),
            b'B' if !in_class => Ok(Esc::Look(Anchor::NotWord)),
            b'A' if !in_class => Ok(Esc::Look(Anchor::Start)),
            b'z' if !in_class => Ok(Esc::Look(Anchor::End)),
            b'Z' if !in_class => Ok(Esc::Look(Anchor::EndOrFinalNl)),
            b'G' => skip("\\G"),
            b'K' => skip("\\K"),
            b'R' => skip("\\R (an atomic group)"),
            b'X' => skip("\\X"),
            b'p' | b'P' => skip("Unicode property"),
            b'g' | b'k' => skip("back-reference"),
            b'1'..=b'9' if !in_class => skip("back-reference"),
            b'0'..=b'7' => {
                // \0 takes two more octal digits; in a class \1-\7 are octal too.
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 {
                    let Some(d) = self.peek().filter(|d| (b'0'..=b'7').contains(d)) else {
                        break;
                    };
                    v = v * 8 + u32::from(d - b'0');
                    self.i += 1;
                    n += 1;
                }
                u8::try_from(v)
                    .map(Esc::Byte)
                    .or_else(|_| skip("octal past \\377"))
            }
            b'o' if self.peek() == Some(b'{') => self.braced(8).map(Esc::Byte),
            b'x' if self.peek() == Some(b'{') => self.braced(16).map(Esc::Byte),
            b'x' => byte(self.hex(2) as u8),
            b'c' => match self.peek() {
                Some(x @ 0x20..=0x7e) => {
                    self.i += 1;
                    byte(x.to_ascii_uppercase() ^ 0x40)
                }
                _ => skip("syntax: bad \\c"),
            },
            b'Q' => {
                let mut out = Vec::new();
                while self.i < self.p.len() && !self.starts(b"\\E") {
                    out.push(self.p[self.i]);
                    self.i += 1;
                }
                if self.starts(b"\\E") {
                    self.i += 2;
                }
                Ok(Esc::Quoted(out))
            }
            b'E' => Ok(Esc::Nothing),
            _ if c.is_ascii_alphanumeric() => skip(format!("unknown escape \\{}", c as char)),
            _ => byte(c),
        }
    }

    /// A character class after `[`.
    fn class(&mut self, f: &Flags) -> Res<Set> {
        let negated = self.peek() == Some(b'^');
        if negated {
            self.i += 1;
        }
        let mut s: Set = [0; 4];
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return skip("syntax: missing ]");
            };
            if c == b']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            // One item: a single byte (which may start a range) or a set.
            let lo = match c {
                b'[' if matches!(self.at(1), Some(b':' | b'.' | b'='))
                    && self.posix_end().is_some() =>
                {
                    let set = self.posix(f)?;
                    union(&mut s, &set);
                    if self.peek() == Some(b'-') && self.at(1) != Some(b']') {
                        return skip("syntax: a range from a class");
                    }
                    continue;
                }
                b'\\' => {
                    self.i += 1;
                    match self.escape(true)? {
                        Esc::Byte(b) => b,
                        Esc::Set(set) => {
                            union(&mut s, &set);
                            if self.peek() == Some(b'-') && self.at(1) != Some(b']') {
                                return skip("syntax: a range from a class");
                            }
                            continue;
                        }
                        Esc::Nothing => continue,
                        Esc::Quoted(bytes) => {
                            bytes.iter().for_each(|&b| set_add(&mut s, b));
                            continue;
                        }
                        Esc::Look(_) => return skip("syntax: an assertion in a class"),
                    }
                }
                _ => {
                    self.i += 1;
                    c
                }
            };
            if self.peek() == Some(b'-') && self.at(1).is_some_and(|c| c != b']') {
                self.i += 1;
                let hi = match self.peek() {
                    Some(b'\\') => {
                        self.i += 1;
                        match self.escape(true)? {
                            Esc::Byte(b) => b,
                            _ => return skip("syntax: a range to a class"),
                        }
                    }
                    Some(b'[') if matches!(self.at(1), Some(b':' | b'.' | b'=')) => {
                        return skip("syntax: a range to a class")
                    }
                    Some(h) => {
                        self.i += 1;
                        h
                    }
                    None => return skip("syntax: missing ]"),
                };
                if hi < lo {
                    return skip("syntax: range out of order");
                }
                union(&mut s, &set_range(lo, hi));
            } else {
                set_add(&mut s, lo);
            }
        }
        if f.caseless {
            fold(&mut s);
        }
        Ok(if negated { not(&s) } else { s })
    }

    /// Where a POSIX class `[:name:]` at the cursor ends (the index after `:]`).
    fn posix_end(&self) -> Option<usize> {
        let open = self.at(1)?;
        let rest = &self.p[self.i + 2..];
        let n = rest
            .iter()
            .take_while(|c| c.is_ascii_alphabetic() || **c == b'^')
            .count();
        (rest.get(n) == Some(&open) && rest.get(n + 1) == Some(&b']')).then_some(self.i + n + 4)
    }

    fn posix(&mut self, f: &Flags) -> Res<Set> {
        let open = self.at(1).unwrap_or(b':');
        let end = self.posix_end().unwrap_or(self.i);
        let name = &self.p[self.i + 2..end - 2];
        self.i = end;
        if open != b':' {
            return skip("syntax: POSIX collating element");
        }
        let (neg, name) = match name.strip_prefix(b"^") {
            Some(n) => (true, n),
            None => (false, name),
        };
        let r = set_range;
        let mut s = match name {
            b"alpha" => or(r(b'A', b'Z'), r(b'a', b'z')),
            b"digit" => r(b'0', b'9'),
            b"alnum" => or(or(r(b'A', b'Z'), r(b'a', b'z')), r(b'0', b'9')),
            b"space" => set_of(b"\t\n\x0b\x0c\r "),
            b"upper" if f.caseless && !neg => or(r(b'A', b'Z'), r(b'a', b'z')),
            b"lower" if f.caseless && !neg => or(r(b'A', b'Z'), r(b'a', b'z')),
            b"upper" | b"lower" if f.caseless => return skip("[:^upper:] / [:^lower:] caseless"),
            b"upper" => r(b'A', b'Z'),
            b"lower" => r(b'a', b'z'),
            b"punct" => or(
                or(r(b'!', b'/'), r(b':', b'@')),
                or(r(b'[', b'`'), r(b'{', b'~')),
            ),
            b"xdigit" => or(or(r(b'0', b'9'), r(b'A', b'F')), r(b'a', b'f')),
            b"word" => {
                let mut w = or(or(r(b'A', b'Z'), r(b'a', b'z')), r(b'0', b'9'));
                set_add(&mut w, b'_');
                w
            }
            b"blank" => set_of(b"\t "),
            b"cntrl" => or(r(0, 31), set_of(&[127])),
            b"graph" => r(33, 126),
            b"print" => r(32, 126),
            b"ascii" => r(0, 127),
            _ => return skip("syntax: unknown POSIX class"),
        };
        if neg {
            s = not(&s);
        }
        Ok(s)
    }
}

fn or(mut a: Set, b: Set) -> Set {
    union(&mut a, &b);
    a
}

/// A literal byte, both cases under `i`.
fn lit(b: u8, f: &Flags) -> Ast {
    let mut s = [0; 4];
    set_add(&mut s, b);
    if f.caseless {
        fold(&mut s);
    }
    Ast::Set(s)
}

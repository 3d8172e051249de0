//! IDS rules in Suricata syntax: the parsed form ([`Rule`]), the parser ([`parse_rule`]) and
//! the loader with its report ([`load_dir`], [`LoadReport`]).
//!
//! A rule is parsed fully, whatever it needs; whether it can be evaluated is a separate
//! question ([`Rule::blockers`]): a rule that needs something pktwarp does not have (pcre, the
//! flow table, an app-layer protocol, an unknown keyword) is skipped with that reason, and its
//! parsed form keeps every keyword so it can be enabled once the missing piece lands.

mod lex;
pub mod load;
mod net;
mod options;
mod pcre_kw;

pub use load::{load_dir, load_file, load_str, LoadOptions, LoadReport, LoadedRule, Skipped};
pub use net::{addr_key as net_key, parse_addrs, parse_ports, AddrSet, PortSet, Variables};
pub use options::parse_rule;

use std::fmt;

/// A rule error: where (file, line), which keyword, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {}{keyword}: {msg}", sid.map(|s| format!("sid {s}: ")).unwrap_or_default())]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    /// The rule's sid when it was read before the error.
    pub sid: Option<u32>,
    /// The keyword (or header field: `action`, `protocol`, `source`, ...) that is wrong.
    pub keyword: String,
    pub msg: String,
}

/// What the rule does when it matches. `reject` is treated as `drop` (pktwarp sends no
/// TCP reset or ICMP unreachable); the parsed form keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Alert,
    Drop,
    Pass,
    Reject,
}

/// The protocol field. `Http` rules match TCP segments that carry an HTTP/1.x head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    Ip,
    Http,
    /// An app-layer protocol pktwarp does not parse (dns, tls, smb, ...): the rule is skipped.
    AppLayer(String),
}

/// `->` or `<>` (either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    To,
    Both,
}

/// The buffer a payload keyword inspects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Buffer {
    /// The L4 payload of the frame (`pkt_data`, the default).
    Payload = 0,
    HttpUri = 1,
    HttpRawUri = 2,
    HttpMethod = 3,
    HttpHeader = 4,
    HttpRawHeader = 5,
    HttpUserAgent = 6,
    HttpHost = 7,
    HttpRawHost = 8,
    HttpCookie = 9,
    HttpClientBody = 10,
    HttpStatCode = 11,
    HttpStatMsg = 12,
    /// `file_data`: the HTTP response body.
    FileData = 13,
    /// `\r\n` + each header name + `\r\n`, then `\r\n`.
    HttpHeaderNames = 14,
    /// The start line and the headers (`Name: value\r\n`), then `\r\n`.
    HttpStart = 15,
    /// `HTTP/1.1`.
    HttpProtocol = 16,
    HttpRequestLine = 17,
    HttpResponseLine = 18,
    HttpContentType = 19,
    HttpContentLen = 20,
    HttpAccept = 21,
    HttpAcceptEnc = 22,
    HttpAcceptLang = 23,
    HttpConnection = 24,
    HttpReferer = 25,
    HttpServer = 26,
    HttpLocation = 27,
}

/// Number of [`Buffer`] kinds.
pub const BUFFER_COUNT: usize = 28;

impl Buffer {
    /// Every buffer, in code order (`ALL[b as usize] == b`).
    pub const ALL: [Buffer; BUFFER_COUNT] = {
        use Buffer::*;
        [
            Payload,
            HttpUri,
            HttpRawUri,
            HttpMethod,
            HttpHeader,
            HttpRawHeader,
            HttpUserAgent,
            HttpHost,
            HttpRawHost,
            HttpCookie,
            HttpClientBody,
            HttpStatCode,
            HttpStatMsg,
            FileData,
            HttpHeaderNames,
            HttpStart,
            HttpProtocol,
            HttpRequestLine,
            HttpResponseLine,
            HttpContentType,
            HttpContentLen,
            HttpAccept,
            HttpAcceptEnc,
            HttpAcceptLang,
            HttpConnection,
            HttpReferer,
            HttpServer,
            HttpLocation,
        ]
    };

    /// The buffer of a code, None past the last.
    pub fn from_code(b: u8) -> Option<Buffer> {
        Buffer::ALL.get(usize::from(b)).copied()
    }

    /// True for the HTTP buffers (those need an HTTP head in the segment).
    pub fn is_http(self) -> bool {
        self != Buffer::Payload
    }
}

/// A `content` and its modifiers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Content {
    pub pattern: Vec<u8>,
    pub negated: bool,
    pub nocase: bool,
    pub offset: Option<u32>,
    pub depth: Option<u32>,
    pub distance: Option<i32>,
    pub within: Option<i32>,
    pub fast_pattern: FastPattern,
    pub rawbytes: bool,
}

impl Content {
    /// Relative to the previous match in its buffer (`distance` or `within`).
    pub fn is_relative(&self) -> bool {
        self.distance.is_some() || self.within.is_some()
    }
}

/// `fast_pattern` on a content (a hint for the prefilter; no effect on the match).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FastPattern {
    #[default]
    No,
    Yes,
    Only,
    /// `fast_pattern:offset,length`: only those bytes of the pattern go to the prefilter.
    Part {
        offset: u16,
        len: u16,
    },
}

/// A range test on a number (`dsize`, `urilen`, `itype`, `icode`); `Between` is exclusive
/// (`a<>b`: a < x < b), as Suricata defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Eq(u32),
    Lt(u32),
    Gt(u32),
    Between(u32, u32),
}

impl Range {
    pub fn test(self, x: u32) -> bool {
        match self {
            Range::Eq(a) => x == a,
            Range::Lt(a) => x < a,
            Range::Gt(a) => x > a,
            Range::Between(a, b) => a < x && x < b,
        }
    }
}

/// How `byte_test` / `byte_jump` read their number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumFormat {
    #[default]
    BigEndian,
    LittleEndian,
    /// ASCII digits in base 8, 10 or 16.
    String(u8),
}

/// `byte_test` comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ByteOp {
    Lt = 0,
    Gt = 1,
    Eq = 2,
    Le = 3,
    Ge = 4,
    And = 5,
    Xor = 6,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteTest {
    pub nbytes: u8,
    pub negated: bool,
    pub op: ByteOp,
    pub value: u64,
    pub offset: i32,
    pub relative: bool,
    pub format: NumFormat,
    pub bitmask: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteJump {
    pub nbytes: u8,
    pub offset: i32,
    pub relative: bool,
    pub format: NumFormat,
    pub multiplier: u32,
    pub align: bool,
    pub from_beginning: bool,
    pub post_offset: i32,
    pub bitmask: Option<u64>,
}

/// One payload keyword, in rule order, with the buffer it inspects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detect {
    Content(Content),
    IsDataAt {
        n: u32,
        negated: bool,
        relative: bool,
    },
    ByteTest(ByteTest),
    ByteJump(ByteJump),
    UriLen(Range),
    Pcre(Pcre),
}

/// A `pcre` keyword: `[!]"/pattern/flags"`, with its DFA tables ([`crate::pcre`]) or the
/// reason it has none (the rule is then skipped with `pcre: <reason>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pcre {
    /// The regex between the slashes, as written.
    pub pattern: String,
    /// The letters after the last slash.
    pub flags: String,
    /// `R`: the subject starts at the detection pointer.
    pub relative: bool,
    /// `!`: the keyword holds when the pattern does not match.
    pub negated: bool,
    pub compiled: Result<std::sync::Arc<crate::pcre::Compiled>, String>,
}

impl Detect {
    /// Evaluated relative to the previous match in its buffer.
    pub fn is_relative(&self) -> bool {
        match self {
            Detect::Content(c) => c.is_relative(),
            Detect::IsDataAt { relative, .. } => *relative,
            Detect::ByteTest(t) => t.relative,
            Detect::ByteJump(j) => j.relative,
            Detect::UriLen(_) => false,
            Detect::Pcre(p) => p.relative,
        }
    }
}

/// `flags`: TCP flag bits (FIN 0x01 .. CWR 0x80) with Suricata's modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpFlags {
    pub flags: u8,
    /// `+` all of these (others may be set), `*` any of these, `!` not all of these (as
    /// Suricata tests it), or exactly these.
    pub mode: FlagMode,
    /// Bits ignored in the packet before the test.
    pub ignore: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FlagMode {
    Exact = 0,
    All = 1,
    Any = 2,
    Not = 3,
}

/// The `flow` keyword's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    pub to_server: bool,
    pub to_client: bool,
    pub established: bool,
    pub not_established: bool,
    pub stateless: bool,
    pub only_stream: bool,
    pub no_stream: bool,
}

impl Flow {
    /// Needs per-flow state: direction and establishment are properties of the flow.
    pub fn needs_flow_table(&self) -> bool {
        self.to_server || self.to_client || self.established || self.not_established
    }
}

/// A `flowbits` command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowbitCmd {
    Set,
    Unset,
    Toggle,
    IsSet,
    IsNotSet,
    /// The rule alerts never (it only sets state for other rules).
    NoAlert,
}

/// One `flowbits` keyword: its command and names. More than one name is an OR-group
/// (`isset,a|b`: any is set; `isnotset,a|b`: any is not set), which Suricata allows for
/// isset and isnotset only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flowbit {
    pub cmd: FlowbitCmd,
    pub names: Vec<String>,
}

/// `threshold` types (`detection_filter` is [`ThresholdKind::Detection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThresholdKind {
    /// At most `count` alerts per `seconds` window.
    Limit,
    /// An alert on every `count`-th match within a window.
    Threshold,
    /// One alert per window, on the `count`-th match.
    Both,
    /// `detection_filter`: an alert on every match after the first `count` in a window.
    Detection,
}

/// What a threshold counts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Track {
    BySrc,
    ByDst,
    /// One counter for the rule.
    ByRule,
    /// One counter per (source, destination) pair.
    ByBoth,
}

/// A `threshold` or `detection_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub kind: ThresholdKind,
    pub track: Track,
    pub count: u32,
    pub seconds: u32,
}

/// A parsed rule. Every keyword is kept, supported or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    pub proto: Proto,
    pub src: AddrSet,
    pub src_ports: PortSet,
    pub direction: Direction,
    pub dst: AddrSet,
    pub dst_ports: PortSet,
    pub msg: String,
    pub sid: u32,
    pub rev: u32,
    pub gid: u32,
    pub classtype: Option<String>,
    pub priority: Option<u32>,
    pub metadata: Vec<String>,
    pub references: Vec<String>,
    /// Payload keywords in rule order, each with its buffer.
    pub detect: Vec<(Buffer, Detect)>,
    pub dsize: Option<Range>,
    pub flags: Option<TcpFlags>,
    pub itype: Option<Range>,
    pub icode: Option<Range>,
    pub flow: Option<Flow>,
    /// `flowbits` keywords in rule order.
    pub flowbits: Vec<Flowbit>,
    pub threshold: Option<Threshold>,
    pub detection_filter: Option<Threshold>,
    /// Keywords the parser knows nothing about, in rule order, with their values.
    pub unknown: Vec<(String, Option<String>)>,
    /// Every option keyword of the rule, in rule order, as written (what a loaded rule uses).
    pub keywords: Vec<String>,
}

/// Most payload keywords a rule may have (the evaluator's per-rule state has this size).
pub const MAX_DETECT: usize = 64;

/// Why a parsed rule cannot be evaluated yet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Blocker {
    /// An app-layer protocol in the header (dns, tls, smb, ...).
    Protocol(String),
    /// A keyword pktwarp does not implement (the first one).
    Keyword(String),
    /// A `pcre` without a DFA form, with the reason (`back-reference`, `DFA over N states`).
    Pcre(String),
    /// `flow` (direction, established), `flowbits`, `threshold`, `detection_filter`: loaded
    /// only for a pipeline with connection tracking ([`LoadOptions::flow_table`]).
    FlowTable(String),
    /// `flow:only_stream`: needs reassembled streams.
    Stream,
    /// More than [`MAX_DETECT`] payload keywords.
    TooManyKeywords(usize),
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::Protocol(p) => write!(f, "app-layer protocol {p}"),
            Blocker::Keyword(k) => write!(f, "unsupported keyword {k}"),
            Blocker::Pcre(why) => write!(f, "pcre: {why}"),
            Blocker::FlowTable(k) => write!(f, "needs the flow table ({k})"),
            Blocker::Stream => write!(f, "needs stream reassembly (flow:only_stream)"),
            Blocker::TooManyKeywords(n) => {
                write!(f, "{n} payload keywords (at most {MAX_DETECT})")
            }
        }
    }
}

/// A pattern a rule cannot match without: one of its positive contents, in its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefilter {
    pub buffer: Buffer,
    pub pattern: Vec<u8>,
    pub nocase: bool,
}

impl Rule {
    /// The pattern a multi-pattern prefilter can require for this rule: the content marked
    /// `fast_pattern` (its `offset,length` part if given), else the longest positive content
    /// (the first of equals). None when the rule has no positive content (it must be checked
    /// on every frame). Any positive content must occur for the rule to match, so the choice
    /// changes speed, never the result.
    pub fn prefilter(&self) -> Option<Prefilter> {
        let positive = self.detect.iter().filter_map(|(b, d)| match d {
            Detect::Content(c) if !c.negated => Some((*b, c)),
            _ => None,
        });
        let mut best: Option<(Buffer, &Content)> = None;
        for (b, c) in positive {
            if c.fast_pattern != FastPattern::No {
                best = Some((b, c));
                break;
            }
            if best.is_none_or(|(_, x)| c.pattern.len() > x.pattern.len()) {
                best = Some((b, c));
            }
        }
        let (buffer, c) = best?;
        let pattern = match c.fast_pattern {
            FastPattern::Part { offset, len } => {
                let (o, l) = (usize::from(offset), usize::from(len));
                c.pattern.get(o..o + l).unwrap_or(&c.pattern).to_vec()
            }
            _ => c.pattern.clone(),
        };
        Some(Prefilter {
            buffer,
            pattern,
            nocase: c.nocase,
        })
    }

    /// Everything that keeps this rule from being evaluated without a flow table, hardest
    /// first: protocol, the first unknown keyword, too many payload keywords, pcre, then
    /// stream and flow-table keywords. Empty: it can be loaded.
    pub fn blockers(&self) -> Vec<Blocker> {
        self.blockers_with(false)
    }

    /// [`Rule::blockers`] for a pipeline that has (`flow_table`) or lacks connection
    /// tracking: with it, the flow keywords block nothing.
    pub fn blockers_with(&self, flow_table: bool) -> Vec<Blocker> {
        let mut out = Vec::new();
        if let Proto::AppLayer(p) = &self.proto {
            out.push(Blocker::Protocol(p.clone()));
        }
        if let Some((k, _)) = self.unknown.first() {
            out.push(Blocker::Keyword(k.clone()));
        }
        if self.detect.len() > MAX_DETECT {
            out.push(Blocker::TooManyKeywords(self.detect.len()));
        }
        if let Some(why) = self.detect.iter().find_map(|(_, d)| match d {
            Detect::Pcre(p) => p.compiled.as_ref().err(),
            _ => None,
        }) {
            out.push(Blocker::Pcre(why.clone()));
        }
        if let Some(f) = &self.flow {
            if f.only_stream {
                out.push(Blocker::Stream);
            }
            if f.needs_flow_table() && !flow_table {
                out.push(Blocker::FlowTable("flow".into()));
            }
        }
        if flow_table {
            return out;
        }
        if !self.flowbits.is_empty() {
            out.push(Blocker::FlowTable("flowbits".into()));
        }
        if self.threshold.is_some() {
            out.push(Blocker::FlowTable("threshold".into()));
        }
        if self.detection_filter.is_some() {
            out.push(Blocker::FlowTable("detection_filter".into()));
        }
        out
    }

    /// The rule keeps state on the CPU (flowbits, threshold, detection_filter): the GPU image
    /// refuses it.
    pub fn needs_cpu_state(&self) -> bool {
        !self.flowbits.is_empty() || self.threshold.is_some() || self.detection_filter.is_some()
    }
}

#[cfg(test)]
mod tests;

//! Fuzz target `rules`: the ACL rule parsers (YAML and ClassBench / `dpdk-test-acl` lines), the
//! steering rule parser and the route file parser on arbitrary text. Any input gives rules or a `RuleError`, never a
//! panic; rules that parse also compile into a classifier.
#![no_main]

use flow_rules::acl::{classbench, yaml, AclRuleSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz.rules");
    for parsed in [yaml::parse(path, text), classbench::parse_rules(path, text)] {
        if let Ok(rules) = parsed {
            let mut set = AclRuleSet {
                rules,
                warnings: Vec::new(),
            };
            let _ = set.compile();
        }
    }
    let _ = flow_rules::steering::SteerRuleSet::parse(text, path);
    // Parsed only: building a family's tables allocates 64 MiB, too slow for a fuzz loop.
    let _ = flow_rules::route::RouteFile::parse(text, path);
});

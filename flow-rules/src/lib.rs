//! Steering and ACL rules: the rule model, YAML and ClassBench parsers, and the classifier
//! compiler whose flat tables the CPU and GPU matchers both walk.

pub mod abi;
pub mod acl;
pub mod error;
pub mod input;
pub mod route;
pub mod steering;

fn main() { println!("pktwarp: under construction"); }

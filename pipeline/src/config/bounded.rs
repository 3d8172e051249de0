//! Whole-number config keys whose allowed range is narrower than their Rust type: read as a
//! number of any width, then checked against the key's own range, so an error gives that range
//! (`queues.count: 99999 is out of range (allowed range 1 ..= 1024)`), not the type's.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};

/// `#[serde(deserialize_with = "whole::<_, T, LO, HI>")]`: a whole number in `LO ..= HI`.
pub(crate) fn whole<'de, D, T, const LO: u64, const HI: u64>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let v = d.deserialize_any(InRange::<LO, HI>(PhantomData))?;
    T::try_from(v).map_err(|_| de::Error::custom(format!("{v} does not fit the key's type")))
}

struct InRange<const LO: u64, const HI: u64>(PhantomData<()>);

impl<const LO: u64, const HI: u64> InRange<LO, HI> {
    fn out_of_range<E: de::Error>(v: impl fmt::Display) -> E {
        E::custom(format!("{v} is out of range (allowed range {LO} ..= {HI})"))
    }
}

impl<'de, const LO: u64, const HI: u64> Visitor<'de> for InRange<LO, HI> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a whole number in {LO} ..= {HI}")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        if (LO..=HI).contains(&v) {
            Ok(v)
        } else {
            Err(Self::out_of_range(v))
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(Self::out_of_range(v)),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(Self::out_of_range(v)),
        }
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(Self::out_of_range(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    struct Q {
        #[serde(deserialize_with = "super::whole::<_, u16, 1, 1024>")]
        count: u16,
    }

    fn read(text: &str) -> Result<u16, String> {
        serde_saphyr::from_str::<Q>(text)
            .map(|q| q.count)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_value_in_range_is_read() {
        assert_eq!(read("count: 1").unwrap(), 1);
        assert_eq!(read("count: 1024").unwrap(), 1024);
    }

    #[test]
    fn out_of_range_values_name_the_keys_range_not_the_types() {
        for v in [
            "0",
            "1025",
            "99999",
            "-1",
            "5000000000",
            "99999999999999999999999",
        ] {
            let e = read(&format!("count: {v}")).unwrap_err();
            assert!(e.contains("1 ..= 1024"), "{v}: {e}");
            assert!(!e.contains("65535"), "{v}: {e}");
        }
        let e = read("count: lots").unwrap_err();
        assert!(e.contains("a whole number in 1 ..= 1024"), "{e}");
    }
}

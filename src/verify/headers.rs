//! A request's headers as a scheme reads them: a signature header as text,
//! a timestamp checked against the clock.

use super::failure::{Failure, Reason, Why};

/// The headers (a header's first value by lowercase name), the clock and
/// the source's tolerance.
pub(super) struct Headers<'a, 'h> {
    pub get: &'a dyn Fn(&str) -> Option<&'h [u8]>,
    pub now_s: u64,
    pub tolerance_s: u64,
}

impl<'h> Headers<'_, 'h> {
    /// A header's value, which must be there and be text.
    pub fn text(&self, name: &str) -> Result<&'h str, Failure> {
        let v = (self.get)(name).ok_or_else(|| Failure::missing(name))?;
        std::str::from_utf8(v)
            .map_err(|_| Failure::new(Reason::Malformed, Why::NotText(name.to_owned())))
    }

    /// A timestamp (`ms`: in milliseconds) within the tolerance of the
    /// clock; `name` is the header it came from.
    pub fn fresh(&self, name: &str, ts: &str, ms: bool) -> Result<(), Failure> {
        let t: u64 = ts
            .trim()
            .parse()
            .map_err(|_| Failure::new(Reason::Malformed, Why::NotANumber(name.to_owned())))?;
        let t = if ms { t / 1000 } else { t };
        if t.abs_diff(self.now_s) > self.tolerance_s {
            // Both are below 2^64; the difference is clamped, never wraps.
            let skew = i128::from(t) - i128::from(self.now_s);
            let skew_s = i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
            return Err(Failure::new(
                Reason::Expired,
                Why::Skew {
                    header: name.to_owned(),
                    skew_s,
                    tolerance_s: self.tolerance_s,
                },
            ));
        }
        Ok(())
    }
}

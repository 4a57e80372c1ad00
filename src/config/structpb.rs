//! A `google.protobuf.Struct` in its protobuf wire form, as Envoy hands a
//! Struct plugin configuration to a Wasm module (a filter configured in
//! YAML), decoded into the JSON value the checker reads.
//!
//! Struct { map<string, Value> fields = 1 }; Value { oneof kind:
//! null_value = 1 (varint), number_value = 2 (fixed64 double), string_value
//! = 3, bool_value = 4 (varint), struct_value = 5, list_value = 6 };
//! ListValue { repeated Value values = 1 }. Every number is a double: an
//! integral one within u64 (or i64) becomes a JSON integer, so that
//! `ttl_ms: 60000` in YAML is the integer the checker wants.

use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (a hostile configuration cannot
/// exhaust the stack).
const MAX_DEPTH: usize = 64;

/// Why bytes are not a Struct: the byte offset and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub at: usize,
    pub what: &'static str,
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    /// Where `b` starts in the whole buffer: every error's offset is the
    /// whole buffer's.
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8], base: usize) -> Self {
        Reader { b, i: 0, base }
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, Error> {
        Err(Error {
            at: self.base + self.i,
            what,
        })
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.b.get(self.i) else {
                return self.fail("truncated varint");
            };
            self.i += 1;
            v |= u64::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        self.fail("varint longer than 10 bytes")
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.i.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return self.fail("length past the end");
        };
        let out = &self.b[self.i..end];
        self.i = end;
        Ok(out)
    }

    /// A length-delimited field's bytes, and where they start in the whole
    /// buffer.
    fn len_delimited(&mut self) -> Result<(&'a [u8], usize), Error> {
        let n = self.varint()?;
        let n = usize::try_from(n).or_else(|_| self.fail("length too large"))?;
        let start = self.base + self.i;
        Ok((self.bytes(n)?, start))
    }

    /// (field number, wire type) of the next tag.
    fn tag(&mut self) -> Result<(u64, u8), Error> {
        let t = self.varint()?;
        Ok((t >> 3, (t & 7) as u8))
    }

    /// Skips a field of an unknown number (forward compatibility).
    fn skip(&mut self, wire: u8) -> Result<(), Error> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.bytes(8).map(|_| ()),
            2 => self.len_delimited().map(|_| ()),
            5 => self.bytes(4).map(|_| ()),
            _ => self.fail("unknown wire type"),
        }
    }

    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
}

/// Decodes a serialized Struct into a JSON object.
pub fn decode(b: &[u8]) -> Result<Value, Error> {
    strukt(b, 0, 0)
}

fn too_deep(at: usize) -> Error {
    Error {
        at,
        what: "nested too deep",
    }
}

/// UTF-8 text of a field whose bytes start at `start`; an error at its
/// first byte that is not.
fn text(raw: &[u8], start: usize, what: &'static str) -> Result<String, Error> {
    std::str::from_utf8(raw)
        .map(str::to_owned)
        .map_err(|e| Error {
            at: start + e.valid_up_to(),
            what,
        })
}

fn strukt(b: &[u8], base: usize, depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        return Err(too_deep(base));
    }
    let mut map = Map::new();
    repeated(b, base, |entry, start| {
        let (k, v) = map_entry(entry, start, depth)?;
        map.insert(k, v);
        Ok(())
    })?;
    Ok(Value::Object(map))
}

/// Hands each field 1 of a message (a Struct's map entries, a ListValue's
/// values: both repeated, length-delimited), with where its bytes start in
/// the whole buffer, to `each`; any other field is skipped.
fn repeated(
    b: &[u8],
    base: usize,
    mut each: impl FnMut(&[u8], usize) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut r = Reader::new(b, base);
    while !r.done() {
        let (field, wire) = r.tag()?;
        if (field, wire) != (1, 2) {
            r.skip(wire)?;
            continue;
        }
        let (raw, start) = r.len_delimited()?;
        each(raw, start)?;
    }
    Ok(())
}

fn map_entry(b: &[u8], base: usize, depth: usize) -> Result<(String, Value), Error> {
    let mut r = Reader::new(b, base);
    let (mut key, mut value) = (String::new(), Value::Null);
    while !r.done() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, 2) => {
                let (raw, start) = r.len_delimited()?;
                key = text(raw, start, "a key is not UTF-8")?;
            }
            (2, 2) => {
                let (raw, start) = r.len_delimited()?;
                value = val(raw, start, depth + 1)?;
            }
            _ => r.skip(wire)?,
        }
    }
    Ok((key, value))
}

fn val(b: &[u8], base: usize, depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        return Err(too_deep(base));
    }
    let mut r = Reader::new(b, base);
    let mut out = Value::Null;
    while !r.done() {
        let (field, wire) = r.tag()?;
        out = match (field, wire) {
            (1, 0) => {
                r.varint()?;
                Value::Null
            }
            (2, 1) => {
                let raw = r.bytes(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(raw);
                number(f64::from_le_bytes(a))
            }
            (3, 2) => {
                let (raw, start) = r.len_delimited()?;
                Value::String(text(raw, start, "a string is not UTF-8")?)
            }
            (4, 0) => Value::Bool(r.varint()? != 0),
            (5, 2) => {
                let (raw, start) = r.len_delimited()?;
                strukt(raw, start, depth + 1)?
            }
            (6, 2) => {
                let (raw, start) = r.len_delimited()?;
                list(raw, start, depth + 1)?
            }
            _ => {
                r.skip(wire)?;
                continue;
            }
        };
    }
    Ok(out)
}

fn list(b: &[u8], base: usize, depth: usize) -> Result<Value, Error> {
    let mut items = Vec::new();
    repeated(b, base, |raw, start| {
        items.push(val(raw, start, depth + 1)?);
        Ok(())
    })?;
    Ok(Value::Array(items))
}

/// A double as JSON: an integral value as an integer (YAML's `60000` is a
/// double in a Struct), anything else as a float; NaN and infinities, which
/// JSON cannot hold, as null (the checker then refuses the field).
fn number(d: f64) -> Value {
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if d.fract() == 0.0 && (0.0..TWO_64).contains(&d) {
        return Value::Number(Number::from(d as u64));
    }
    if d.fract() == 0.0 && (-9_223_372_036_854_775_808.0..0.0).contains(&d) {
        return Value::Number(Number::from(d as i64));
    }
    Number::from_f64(d).map_or(Value::Null, Value::Number)
}

/// The wire form of a JSON object as a Struct (for tests and fuzzing).
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            let mut entry = Vec::new();
            field_bytes(&mut entry, 1, k.as_bytes());
            field_bytes(&mut entry, 2, &encode_value(x));
            field_bytes(&mut out, 1, &entry);
        }
    }
    out
}

fn encode_value(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Value::Null => out.extend_from_slice(&[0x08, 0]),
        Value::Bool(b) => out.extend_from_slice(&[0x20, u8::from(*b)]),
        Value::Number(n) => {
            out.push(0x11);
            out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
        }
        Value::String(s) => field_bytes(&mut out, 3, s.as_bytes()),
        Value::Array(a) => {
            let mut l = Vec::new();
            for x in a {
                field_bytes(&mut l, 1, &encode_value(x));
            }
            field_bytes(&mut out, 6, &l);
        }
        Value::Object(_) => field_bytes(&mut out, 5, &encode(v)),
    }
    out
}

fn field_bytes(out: &mut Vec<u8>, field: u8, b: &[u8]) {
    out.push(field << 3 | 2);
    let mut n = b.len();
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_with_integral_doubles() {
        let v = json!({"prefix": "/webhooks", "max_json_bytes": 2097152, "affinity": true,
            "n": null, "f": 1.5, "neg": -3, "sources": [{"id": "s", "dedupe": {"json": "id", "ttl_ms": 60000}}]});
        assert_eq!(decode(&encode(&v)), Ok(v));
        assert_eq!(decode(&[]), Ok(json!({})));
    }

    #[test]
    fn malformed_bytes_are_errors_with_a_place() {
        let good = encode(&json!({"a": "b"}));
        for cut in 1..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(&[0x0a, 0xff]).unwrap_err().what, "truncated varint");
        // Hostile nesting is refused, not recursed into.
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert_eq!(
            decode(&encode(&json!({"d": deep}))).unwrap_err().what,
            "nested too deep"
        );
    }

    /// An error names the byte of the whole buffer where it is, however
    /// deep: a string made invalid at byte p is reported at p, and a varint
    /// cut at the end of the buffer at its end.
    #[test]
    fn an_error_is_at_its_byte_of_the_whole_buffer() {
        let good = encode(&json!({"outer": {"list": [1, {"inner": "zzzzzz"}]}}));
        let p = good.windows(6).position(|w| w == b"zzzzzz").unwrap() + 2;
        let mut bad = good.clone();
        bad[p] = 0xff;
        let e = decode(&bad).unwrap_err();
        assert_eq!((e.at, e.what), (p, "a string is not UTF-8"));
        let mut cut = encode(&json!({"k": true}));
        cut.push(0x08); // the tag of another field, then its varint, cut
        cut.push(0x80);
        let e = decode(&cut).unwrap_err();
        assert_eq!((e.at, e.what), (cut.len(), "truncated varint"));
    }
}

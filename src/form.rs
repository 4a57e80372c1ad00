//! `application/x-www-form-urlencoded` bodies: the content-type, and the
//! fields decoded (GitHub's form content type, Twilio's and Slack's forms).

/// An `application/x-www-form-urlencoded` body's fields, decoded (`+` as a
/// space, `%XX` escapes), in order.
pub fn form_fields(body: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    body.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut kv = p.splitn(2, |&b| b == b'=');
            let k = kv.next().unwrap_or_default();
            let v = kv.next().unwrap_or_default();
            (form_decode(k), form_decode(v))
        })
        .collect()
}

fn form_decode(s: &[u8]) -> Vec<u8> {
    let hex = |c: Option<&u8>| c.and_then(|&c| (c as char).to_digit(16)).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => {
                if let (Some(h), Some(l)) = (hex(s.get(i + 1)), hex(s.get(i + 2))) {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Whether a content-type is a form-encoded body's.
pub fn is_form(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|ct| {
        let media = ct.split(|&b| b == b';').next().unwrap_or_default();
        media
            .trim_ascii()
            .eq_ignore_ascii_case(b"application/x-www-form-urlencoded")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode() {
        assert_eq!(
            form_fields(b"payload=%7B%22a%22%3A1%7D&MessageSid=SM+1&x&=y"),
            vec![
                (b"payload".to_vec(), b"{\"a\":1}".to_vec()),
                (b"MessageSid".to_vec(), b"SM 1".to_vec()),
                (b"x".to_vec(), b"".to_vec()),
                (b"".to_vec(), b"y".to_vec()),
            ]
        );
        assert!(is_form(Some(
            b"Application/X-WWW-Form-Urlencoded; charset=utf-8"
        )));
        assert!(!is_form(Some(b"application/json")));
    }
}

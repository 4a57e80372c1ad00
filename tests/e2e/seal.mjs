// The stamp seal as a queue written for Node checks it: npm's
// http-message-signatures (RFC 9421) verifies the signature, and the
// queue's own policy goes around it: the method, path and query covered;
// every stamp-like header (any case, `_` for `-`) in the spelling it came
// in covered, else refused; the Content-Digest covered and matching the
// body (RFC 9530, checked by hand). Headers as Node's http module hands
// them over: names lowercased, repeats joined by ", ".
//
// stdin: {"keys": {keyid: key}, "requests": [{"method", "url", "headers":
// [[name, value], ...], "body": base64, "digest": bool}]}; stdout: a JSON
// list, null for each request whose seal holds, else why not.

import { readFileSync } from 'node:fs';
import { createHash, timingSafeEqual } from 'node:crypto';
import hms from 'http-message-signatures';

const LABEL = 'hookstamp';
const ALG = 'hmac-sha256';

function nodeHeaders(pairs) {
  const out = {};
  for (const [name, value] of pairs) {
    const k = name.toLowerCase();
    out[k] = k in out ? `${out[k]}, ${value}` : value;
  }
  return out;
}

function digestMatches(field, body) {
  const m = /^sha-256=:([A-Za-z0-9+/]+={0,2}):$/.exec(field ?? '');
  if (!m) return false;
  const want = createHash('sha256').update(body).digest();
  const got = Buffer.from(m[1], 'base64');
  return got.length === want.length && timingSafeEqual(got, want);
}

async function check(keys, req) {
  const headers = nodeHeaders(req.headers);
  const body = Buffer.from(req.body, 'base64');
  const stamps = Object.keys(headers).filter((n) => n.replaceAll('_', '-').startsWith('x-hookstamp-'));
  const digest = req.digest || 'content-digest' in headers;
  const requiredFields = ['@method', '@path', '@query', ...stamps, ...(digest ? ['content-digest'] : [])];
  const keyLookup = async (params) => {
    const key = params.tag === LABEL && params.alg === ALG ? keys[params.keyid] : undefined;
    return key === undefined ? null : { id: params.keyid, algs: [ALG], verify: hms.createVerifier(Buffer.from(key), ALG) };
  };
  let ok;
  try {
    ok = await hms.httpbis.verifyMessage({
      keyLookup,
      requiredFields,
      requiredParams: ['created', 'expires', 'nonce', 'alg', 'keyid', 'tag'],
      maxAge: 300,
      tolerance: 5,
      all: true,
    }, { method: req.method, url: req.url, headers });
  } catch (e) {
    return `${e.name}: ${e.message}`;
  }
  if (ok !== true) return `not verified (${ok})`;
  if (digest && !digestMatches(headers['content-digest'], body)) return 'the body does not match its digest';
  return null;
}

const { keys, requests } = JSON.parse(readFileSync(0, 'utf8'));
const out = [];
for (const req of requests) out.push(await check(keys, req));
console.log(JSON.stringify(out));

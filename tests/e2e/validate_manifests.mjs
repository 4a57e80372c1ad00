// Validates Kubernetes manifests against the real CRD schemas (npm:
// @kubernetes-models/istio, @kubernetes-models/envoy-gateway). Prints one
// line a document: "ok <file> <kind>/<name>" or "invalid <file> ...: why";
// exits 1 on any invalid or unknown document.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import Ajv from 'ajv';

const models = {
  'extensions.istio.io/v1alpha1/WasmPlugin': '@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin',
  'networking.istio.io/v1alpha3/EnvoyFilter': '@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter',
  'networking.istio.io/v1/DestinationRule': '@kubernetes-models/istio/networking.istio.io/v1/DestinationRule',
  'security.istio.io/v1/PeerAuthentication': '@kubernetes-models/istio/security.istio.io/v1/PeerAuthentication',
  'security.istio.io/v1/AuthorizationPolicy': '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy',
  'gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy':
    '@kubernetes-models/envoy-gateway/gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy',
  'gateway.envoyproxy.io/v1alpha1/EnvoyProxy':
    '@kubernetes-models/envoy-gateway/gateway.envoyproxy.io/v1alpha1/EnvoyProxy',
};

// Fields newer than the npm models (which let any unknown field by): the
// released CRDs' schemas of these spec fields (schemas/), checked with ajv,
// an unknown field refused where the API server would silently prune it.
const newer = JSON.parse(readFileSync(new URL('./schemas/envoy-gateway-v1.9.0-dynamic-modules.json', import.meta.url)));
const closed = (s) => {
  if (Array.isArray(s)) return s.map(closed);
  if (!s || typeof s !== 'object') return s;
  const o = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'properties'
    ? Object.fromEntries(Object.entries(v).map(([p, q]) => [p, closed(q)])) : closed(v)]));
  if (o.properties && o.type === 'object') o.additionalProperties = false;
  return o;
};
const ajv = new Ajv({ strict: false, allErrors: true });
function checkNewer(key, obj) {
  const fields = newer[key] || {};
  const errs = [];
  for (const [field, schema] of Object.entries(fields)) {
    if (obj.spec?.[field] === undefined) continue;
    const v = ajv.compile(closed(schema));
    if (!v(obj.spec[field])) errs.push(...v.errors.map((e) => `spec.${field}${e.instancePath} ${e.message}`));
  }
  if (errs.length) throw new Error(errs.join('; '));
}

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const obj = doc.toJS();
    if (!obj) continue;
    const key = `${obj.apiVersion}/${obj.kind}`;
    const where = `${file} ${obj.kind}/${obj.metadata?.name}`;
    if (!models[key]) {
      console.log(`invalid ${where}: no schema for ${key}`);
      failed = true;
      continue;
    }
    const mod = await import(models[key]);
    try {
      new mod[obj.kind](obj).validate();
      checkNewer(key, obj);
      console.log(`ok ${where}`);
    } catch (e) {
      console.log(`invalid ${where}: ${e.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);

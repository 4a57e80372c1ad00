// Validates Kubernetes manifests against the real CRD schemas (npm:
// @kubernetes-models/istio, @kubernetes-models/envoy-gateway). Prints one
// line a document: "ok <file> <kind>/<name>" or "invalid <file> ...: why";
// exits 1 on any invalid or unknown document.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const models = {
  'extensions.istio.io/v1alpha1/WasmPlugin': '@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin',
  'networking.istio.io/v1alpha3/EnvoyFilter': '@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter',
  'networking.istio.io/v1/DestinationRule': '@kubernetes-models/istio/networking.istio.io/v1/DestinationRule',
  'security.istio.io/v1/PeerAuthentication': '@kubernetes-models/istio/security.istio.io/v1/PeerAuthentication',
  'security.istio.io/v1/AuthorizationPolicy': '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy',
  'gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy':
    '@kubernetes-models/envoy-gateway/gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy',
};

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
      console.log(`ok ${where}`);
    } catch (e) {
      console.log(`invalid ${where}: ${e.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);

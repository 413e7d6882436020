import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ObjectMeta } from '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { repoDir } from './kustomize';

// kubeconform-style validation of custom resources (Gateway API, the
// Prometheus Operator's ServiceMonitor) against their CRDs' OpenAPI schemas,
// vendored for exact versions in tests/deploy/schemas (each file's $comment
// names its source release and commit). As kubeconform -strict does:
// - an object schema that lists its properties admits no other property
//   (unless it says x-kubernetes-preserve-unknown-fields), so a misspelt
//   field fails instead of being dropped by the API server;
// - x-kubernetes-int-or-string admits an integer or a string (ajv knows OpenAPI's `nullable`);
// - the formats the API server checks (int32, int64, date-time, ip…) are checked.
// metadata is checked against the core ObjectMeta schema (kubernetes-models),
// and holds only what a manifest sets (name, namespace, labels, annotations).
// Not checked, as with kubeconform: the CEL rules (x-kubernetes-validations),
// which only an API server evaluates.

export const SCHEMA_DIR = repoDir('tests/deploy/schemas');

type Node = Record<string, unknown>;
const MANIFEST_METADATA = new Set(['name', 'namespace', 'labels', 'annotations']);
const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

/** kubeconform's openapi2jsonschema -strict, on a copy. */
export function strictSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(strictSchema);
  if (!isNode(node)) return node;
  const out: Node = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === 'properties' && isNode(v) ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, strictSchema(s)])) : strictSchema(v);
  if (isNode(out.properties) && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) out.additionalProperties = false;
  if (out['x-kubernetes-int-or-string'] === true && out.type === undefined && out.anyOf === undefined) out.anyOf = [{ type: 'integer' }, { type: 'string' }];
  return out;
}

function makeAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictTuples: false, strictRequired: false, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  // Kubernetes' annotations on the schema; nothing for a JSON schema validator to do.
  for (const k of ['x-kubernetes-validations', 'x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-map-type', 'x-kubernetes-int-or-string', 'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource']) ajv.addKeyword(k);
  return ajv;
}

export interface CrdValidator {
  /** `apiVersion/kind` of every vendored schema. */
  readonly kinds: string[];
  /** Schema errors of `obj` (metadata included), empty when valid; throws for a kind without a schema. */
  errors(obj: { apiVersion: string; kind: string; metadata?: unknown }): string[];
}

export function loadCrdSchemas(dir = SCHEMA_DIR): CrdValidator {
  const ajv = makeAjv();
  const validators = new Map<string, ValidateFunction>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    // <group>-<version>-<Kind>.json
    const m = /^(.+)-(v[0-9a-z]+)-([A-Za-z]+)\.json$/.exec(file);
    if (!m) throw new Error(`${file}: not <group>-<version>-<Kind>.json`);
    const { $comment, ...schema } = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Node;
    if (typeof $comment !== 'string' || !/ v\d+\.\d+\.\d+ \(commit [0-9a-f]{40}\)/.test($comment)) throw new Error(`${file}: its $comment must name the source release and commit`);
    validators.set(`${m[1]}/${m[2]}/${m[3]}`, ajv.compile(strictSchema(schema) as Node));
  }
  const format = (e: ErrorObject) => `${e.instancePath || '/'} ${e.message ?? e.keyword}${e.keyword === 'additionalProperties' ? `: ${String((e.params as { additionalProperty: string }).additionalProperty)}` : ''}`;
  return {
    kinds: [...validators.keys()].sort(),
    errors(obj) {
      const v = validators.get(`${obj.apiVersion}/${obj.kind}`);
      if (!v) throw new Error(`no vendored schema for ${obj.apiVersion} ${obj.kind}`);
      const out = v(obj) ? [] : (v.errors ?? []).map(format);
      try {
        new ObjectMeta(obj.metadata as ConstructorParameters<typeof ObjectMeta>[0]).validate();
      } catch (err) {
        out.push(`/metadata ${(err as Error).message}`);
      }
      for (const k of Object.keys(isNode(obj.metadata) ? obj.metadata : {})) if (!MANIFEST_METADATA.has(k)) out.push(`/metadata must NOT have additional properties: ${k}`);
      return out;
    },
  };
}

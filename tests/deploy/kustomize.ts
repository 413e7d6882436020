import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

// A deliberately small kustomize: only what deploy/kubernetes uses, so the
// manifests can be checked where kubectl is not installed. When kubectl is on
// PATH the test renders with `kubectl kustomize` as well and requires both to
// agree, so this stays honest. Supported, and nothing else (anything else in a
// kustomization.yaml throws):
// - resources: files, or directories holding a kustomization.yaml (rendered first)
// - namespace: set on every object's metadata.namespace
// - images: name → newName/newTag on containers whose image (without tag) is `name`
// - patches: `path:` files of strategic-merge patches, matched by kind and name;
//   maps merge, `containers`/`env`/`ports`/`volumes` lists merge by `name`,
//   other lists are replaced; a patch whose `$patch` is `delete` removes its object.

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: unknown };

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'patches']);
const MERGE_BY_NAME = new Set(['containers', 'initContainers', 'env', 'ports', 'volumes', 'volumeMounts']);

type Json = unknown;
const isMap = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

function readDocs(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0]!.message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

function merge(base: Json, patch: Json, key = ''): Json {
  if (isMap(base) && isMap(patch)) {
    const out: Record<string, Json> = { ...base };
    for (const [k, v] of Object.entries(patch)) out[k] = k in base ? merge(base[k], v, k) : v;
    return out;
  }
  if (Array.isArray(base) && Array.isArray(patch) && MERGE_BY_NAME.has(key)) {
    const out = base.map((b) => {
      const p = patch.find((x) => isMap(x) && isMap(b) && x.name === b.name);
      return p === undefined ? b : merge(b, p);
    });
    for (const p of patch) if (!base.some((b) => isMap(b) && isMap(p) && b.name === p.name)) out.push(p);
    return out;
  }
  return patch;
}

function setImages(obj: K8sObject, images: { name: string; newName?: string; newTag?: string }[]): void {
  const podSpec = (obj.spec as { template?: { spec?: { containers?: { image: string }[]; initContainers?: { image: string }[] } } } | undefined)?.template?.spec;
  for (const c of [...(podSpec?.containers ?? []), ...(podSpec?.initContainers ?? [])]) {
    const at = c.image.lastIndexOf(':');
    const [name, tag] = at > c.image.lastIndexOf('/') ? [c.image.slice(0, at), c.image.slice(at + 1)] : [c.image, undefined];
    const rule = images.find((i) => i.name === name);
    if (rule) c.image = `${rule.newName ?? name}${(rule.newTag ?? tag) ? `:${rule.newTag ?? tag}` : ''}`;
  }
}

/** Renders the kustomization in `dir` with the subset above. */
export function renderKustomization(dir: string): K8sObject[] {
  const k = readDocs(join(dir, 'kustomization.yaml'))[0] as unknown as Record<string, Json>;
  for (const key of Object.keys(k)) if (!SUPPORTED.has(key)) throw new Error(`${dir}/kustomization.yaml: "${key}" is not supported by tests/deploy/kustomize.ts`);
  let objects: K8sObject[] = [];
  for (const r of (k.resources as string[] | undefined) ?? []) {
    const path = resolve(dir, r);
    objects.push(...(r.endsWith('.yaml') || r.endsWith('.yml') ? readDocs(path) : renderKustomization(path)));
  }
  for (const p of (k.patches as { path?: string }[] | undefined) ?? []) {
    if (!p.path || Object.keys(p).length !== 1) throw new Error(`${dir}: only "path:" patches are supported`);
    for (const patch of readDocs(resolve(dir, p.path))) {
      const at = objects.findIndex((o) => o.kind === patch.kind && o.metadata.name === patch.metadata.name);
      if (at < 0) throw new Error(`${dir}/${p.path}: no ${patch.kind} ${patch.metadata.name} to patch`);
      const directive = (patch as Record<string, Json>).$patch;
      if (directive === 'delete') {
        objects.splice(at, 1);
        continue;
      }
      if (directive !== undefined) throw new Error(`${dir}/${p.path}: only "$patch: delete" is supported`);
      objects[at] = merge(objects[at], patch) as K8sObject;
    }
  }
  objects = objects.map((o) => structuredClone(o));
  for (const o of objects) {
    if (k.namespace) o.metadata.namespace = k.namespace as string;
    setImages(o, (k.images as { name: string; newName?: string; newTag?: string }[] | undefined) ?? []);
  }
  return objects;
}

/** `kubectl kustomize dir`, or undefined when kubectl is not installed. */
export function kubectlKustomize(dir: string): K8sObject[] | undefined {
  const out = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  if (out.error && (out.error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
  if (out.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${out.stderr}`);
  return parseAllDocuments(out.stdout).map((d) => d.toJS() as K8sObject).filter(Boolean);
}

export const repoDir = (...parts: string[]) => resolve(dirname(new URL(import.meta.url).pathname), '..', '..', ...parts);

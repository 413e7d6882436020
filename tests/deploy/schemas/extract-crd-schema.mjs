#!/usr/bin/env node
// Turns a CustomResourceDefinition (YAML, as its project releases it) into the
// JSON schema file the kit's test validates with: the openAPIV3Schema of one
// served version, descriptions dropped (they are most of the size), everything
// else as it is. The test applies kubeconform's strict rules itself.
//   node tests/deploy/schemas/extract-crd-schema.mjs <crd.yaml> <version> <source note> > <out.json>
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { parseAllDocuments } from 'yaml';

const [file, version, source] = process.argv.slice(2);
if (!file || !version || !source) {
  process.stderr.write('usage: extract-crd-schema.mjs <crd.yaml> <version> "<source note>"\n');
  process.exit(2);
}
const crd = parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS()).find((d) => d?.kind === 'CustomResourceDefinition');
if (!crd) throw new Error(`${file}: no CustomResourceDefinition`);
const v = crd.spec.versions.find((x) => x.name === version);
if (!v) throw new Error(`${file}: no version ${version}`);
const strip = (node) => {
  if (Array.isArray(node)) return node.map(strip);
  if (node && typeof node === 'object') {
    const out = {};
    for (const [k, val] of Object.entries(node)) if (k !== 'description') out[k] = strip(val);
    return out;
  }
  return node;
};
const out = {
  $comment: `${crd.spec.group}/${version} ${crd.spec.names.kind}: the openAPIV3Schema of ${source}, descriptions removed (tests/deploy/schemas/extract-crd-schema.mjs)`,
  ...strip(v.schema.openAPIV3Schema),
};
process.stdout.write(`${JSON.stringify(out, null, 1)}\n`);

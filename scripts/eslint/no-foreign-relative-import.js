import path from 'node:path';

/**
 * A relative import in services/<name>/ must stay inside services/<name>/: a
 * path that climbs into another service (or reaches a package by path rather
 * than by its package name) is an error. no-restricted-imports matches the
 * import text only, so it cannot tell `../realtime/x` inside the registry's
 * src/ (its own folder) from `../../../realtime/src/x` (another service); this
 * rule resolves the path against the file.
 */
export default {
  meta: {
    type: 'problem',
    docs: { description: 'relative imports stay inside their own service' },
    messages: {
      foreign: '{{source}} leaves services/{{service}}/: a service never imports another service; shared code goes in packages/ and is imported by package name',
    },
    schema: [],
  },
  create(context) {
    const file = path.relative(context.cwd, context.filename).split(path.sep).join('/');
    const match = /^services\/([^/]+)\//.exec(file);
    if (!match) return {};
    const service = match[1];
    const root = path.resolve(context.cwd, 'services', service);
    const check = (node) => {
      const source = node.source;
      if (!source || source.type !== 'Literal' || typeof source.value !== 'string' || !source.value.startsWith('.')) return;
      const target = path.resolve(path.dirname(path.resolve(context.cwd, context.filename)), source.value);
      const inside = path.relative(root, target);
      if (inside.startsWith('..') || path.isAbsolute(inside)) context.report({ node: source, messageId: 'foreign', data: { source: source.value, service } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

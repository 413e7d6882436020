import path from 'node:path';

/**
 * Which workspace packages a folder may import, as a table of layers (given
 * as options in eslint.config.js). Each layer names the files it holds
 * (`files`, a regular expression on the path from the repository root, minus
 * `except`) and the import specifiers they must not use (`forbid`). Unlike
 * no-restricted-imports, whose options a later config entry replaces, every
 * layer applies on its own, so a file can sit in several.
 *
 * A relative import that reaches into another package's folder is judged as
 * that package's name (`../../channels/src/x` from packages/core is
 * `@service-relay/channels`): a path is no way around a layer.
 */
export default {
  meta: {
    type: 'problem',
    docs: { description: 'workspace layers: what each folder may import' },
    messages: { forbidden: '{{source}}: {{message}}' },
    schema: [
      {
        type: 'array',
        items: {
          type: 'object',
          properties: { files: { type: 'string' }, except: { type: 'string' }, forbid: { type: 'string' }, message: { type: 'string' } },
          required: ['files', 'forbid', 'message'],
          additionalProperties: false,
        },
      },
    ],
  },
  create(context) {
    const file = path.relative(context.cwd, context.filename).split(path.sep).join('/');
    const layers = (context.options[0] ?? []).filter((l) => new RegExp(l.files).test(file) && !(l.except && new RegExp(l.except).test(file)));
    if (layers.length === 0) return {};
    const ownPackage = /^packages\/([^/]+)\//.exec(file)?.[1];
    /** The specifier as a package name when a relative path reaches into another package; else as written. */
    const specifierOf = (source) => {
      if (!source.startsWith('.')) return source;
      const target = path.relative(context.cwd, path.resolve(path.dirname(path.resolve(context.cwd, context.filename)), source)).split(path.sep).join('/');
      const pkg = /^packages\/([^/]+)(\/|$)/.exec(target)?.[1];
      return pkg !== undefined && pkg !== ownPackage ? `@service-relay/${pkg}` : source;
    };
    const check = (node) => {
      const source = node.source;
      if (!source || source.type !== 'Literal' || typeof source.value !== 'string') return;
      const specifier = specifierOf(source.value);
      for (const layer of layers) {
        if (new RegExp(layer.forbid).test(specifier)) context.report({ node: source, messageId: 'forbidden', data: { source: source.value, message: layer.message } });
      }
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

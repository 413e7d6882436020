import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

type Json = Record<string, unknown>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;
const DOC_ID = 'openapi';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

export interface CallOptions {
  /** Path parameters, substituted as given (not encoded: a test may send a malformed one on purpose). */
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/**
 * docs/openapi.yaml as a contract: every answer a test gets through `call` must
 * have a documented status for its operation, a body matching that response's
 * schema and every required header (matching its schema). Remembers which
 * operations and statuses were exercised.
 */
export class OpenApiContract {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  /** "METHOD /template" -> statuses seen */
  readonly exercised = new Map<string, Set<string>>();

  private constructor(readonly doc: Json) {
    addFormats(this.ajv);
    this.ajv.addSchema(doc, DOC_ID);
  }

  /** Parses the document and validates it against the OpenAPI 3.1 schema; throws with every violation. */
  static async load(file: string): Promise<OpenApiContract> {
    const doc = parse(readFileSync(file, 'utf8')) as Json;
    const result = await new Validator().validate(doc);
    if (!result.valid) throw new Error(`${file} is not a valid OpenAPI document:\n${JSON.stringify(result.errors, null, 2)}`);
    return new OpenApiContract(doc);
  }

  /** Every "METHOD /template" the document has. */
  operations(): string[] {
    const out: string[] = [];
    for (const [path, item] of Object.entries(this.doc.paths as Json)) {
      for (const m of METHODS) if ((item as Json)[m]) out.push(`${m.toUpperCase()} ${path}`);
    }
    return out;
  }

  /** The base URL of an operation: its path's `servers`, else the document's. */
  serverOf(template: string): string {
    const item = (this.doc.paths as Json)[template] as Json | undefined;
    const servers = (item?.servers ?? this.doc.servers) as Array<{ url: string }>;
    return servers[0]!.url;
  }

  /**
   * Calls one documented operation on `baseUrl` and checks the answer against
   * the document: the status must be one of the operation's responses.
   */
  async call(baseUrl: string, method: string, template: string, opts: CallOptions = {}): Promise<Answer> {
    const op = this.operation(method, template);
    const answer = await send(baseUrl, method, fill(template, opts.params), opts);
    const key = String(answer.status);
    const ref = (op.responses as Json)[key];
    if (ref === undefined) throw new Error(`${method} ${template}: status ${key} is not documented (body ${answer.text.slice(0, 300)})`);
    this.check(`${method} ${template} ${key}`, ref as Json, `#/paths/${pointerEscape(template)}/${method.toLowerCase()}/responses/${key}`, answer);
    const seen = this.exercised.get(`${method} ${template}`) ?? new Set<string>();
    seen.add(key);
    this.exercised.set(`${method} ${template}`, seen);
    return answer;
  }

  /** A request outside the operations (an unknown path, another method), checked against one of components/responses. */
  async callExpecting(baseUrl: string, method: string, path: string, component: string, opts: CallOptions = {}): Promise<Answer> {
    const answer = await send(baseUrl, method, path, opts);
    this.check(`${method} ${path} (${component})`, { $ref: `#/components/responses/${component}` }, '', answer);
    return answer;
  }

  /** Statuses an operation documents that no call produced: reported, not required (a 500 cannot be provoked). */
  unexercisedStatuses(): string[] {
    const out: string[] = [];
    for (const name of this.operations()) {
      const [method, template] = name.split(' ') as [string, string];
      const seen = this.exercised.get(name) ?? new Set<string>();
      for (const s of Object.keys(this.operation(method, template).responses as Json)) if (!seen.has(s)) out.push(`${name} ${s}`);
    }
    return out;
  }

  private operation(method: string, template: string): Json {
    const op = ((this.doc.paths as Json)[template] as Json | undefined)?.[method.toLowerCase()] as Json | undefined;
    if (!op) throw new Error(`${method} ${template} is not in the document`);
    return op;
  }

  private check(what: string, response: Json, pointer: string, answer: Answer): void {
    // A response is either inline (pointer is its place) or a $ref to components/responses.
    let at = pointer;
    let spec = response;
    if (typeof spec.$ref === 'string') {
      at = spec.$ref.slice(1);
      spec = this.resolve(spec.$ref);
    } else {
      at = at.slice(1);
    }
    const headers = (spec.headers ?? {}) as Record<string, Json>;
    for (const [name, h] of Object.entries(headers)) {
      const header = typeof h.$ref === 'string' ? this.resolve(h.$ref) : h;
      const headerAt = typeof h.$ref === 'string' ? h.$ref.slice(1) : `${at}/headers/${pointerEscape(name)}`;
      const value = answer.headers.get(name);
      if (value === null) {
        if (header.required) throw new Error(`${what}: required header ${name} is missing`);
        continue;
      }
      if (header.schema) this.validate(`${what}: header ${name}`, `${headerAt}/schema`, value);
    }
    const content = spec.content as Record<string, Json> | undefined;
    if (!content) return;
    if (!(answer.headers.get('content-type') ?? '').startsWith('application/json')) throw new Error(`${what}: content-type ${answer.headers.get('content-type')}, documented application/json`);
    this.validate(`${what}: body`, `${at}/content/application~1json/schema`, answer.body);
  }

  private validate(what: string, pointer: string, value: unknown): void {
    const ref = `${DOC_ID}#${pointer}`;
    const validate = this.ajv.getSchema(ref) ?? this.ajv.compile({ $ref: ref });
    if (!validate(value)) throw new Error(`${what} does not match ${pointer}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 500)}`);
  }

  private resolve(ref: string): Json {
    let node: unknown = this.doc;
    for (const part of ref.replace(/^#\//, '').split('/')) node = (node as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    if (node === undefined) throw new Error(`unresolved ${ref}`);
    return node as Json;
  }
}

function pointerEscape(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

function fill(template: string, params: Record<string, string> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${template}`);
    return v;
  });
}

async function send(baseUrl: string, method: string, path: string, opts: CallOptions): Promise<Answer> {
  const qs = opts.query ? `?${new URLSearchParams(opts.query).toString()}` : '';
  const res = await fetch(`${baseUrl}${path}${qs}`, { method, headers: opts.headers, ...(opts.body !== undefined && { body: opts.body }) });
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, text, body };
}

// Every request example in the API reference succeeds as it stands, sent with a token that may do
// everything the document names, and the answers look like the documented response examples.
import { beforeAll, expect, it } from 'vitest';
import { createClient } from '../../src/auth/clients-service.js';
import { exampleOf, fetchDocument, operationsOf, successStatus, type DocumentedOperation, type OpenApiDocument } from '../helpers/openapi-document.js';
import { useTestApp } from '../helpers/test-app.js';

// The webhooks' example URL resolves to this machine, where nothing answers it (no resolver is
// asked, no request leaves the machine).
const t = useTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookResolveHost: () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]) });
let doc: OpenApiDocument;
beforeAll(async () => {
  doc = await fetchDocument(t);
});

// Creations first, then reads, then the operations that change a record, deletions last: the
// order a reader tries them in, and the one in which each finds what the examples before it made.
function rank({ method, path }: DocumentedOperation): number {
  if (method === 'post' && !path.includes('{id}') && !path.endsWith('change-password')) return 0;
  if (method === 'delete') return 3;
  return method === 'get' ? 1 : 2;
}

// The members an answer has that no example can know: ids and times the server gives.
const GENERATED = new Set(['id', 'createdAt', 'updatedAt', 'passwordChangedAt', 'secret']);

function withoutGenerated(value: unknown, keepId: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => withoutGenerated(v, keepId));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !GENERATED.has(key) || (key === 'id' && keepId))
      .map(([key, v]) => [key, withoutGenerated(v, keepId)]),
  );
}

// The documented example of an answer that is a named schema, bare or in the `data` envelope.
function documentedAnswer(operation: DocumentedOperation['operation'], status: number): unknown {
  const schema = operation.responses[String(status)]?.content?.['application/json']?.schema as
    | { $ref?: string; properties?: { data?: { $ref?: string } } }
    | undefined;
  const exampleOfRef = (ref: string | undefined) => {
    const component = ref ? doc.components.schemas[ref.replace('#/components/schemas/', '')] : undefined;
    return (component?.examples as unknown[] | undefined)?.[0];
  };
  if (schema?.$ref) return exampleOfRef(schema.$ref);
  const data = exampleOfRef(schema?.properties?.data?.$ref);
  return data === undefined ? undefined : { data };
}

it('every operation answers its documented success to the request its examples make', { timeout: 60_000 }, async () => {
  const scopes = Object.keys(doc.components.securitySchemes.oauth2!.flows!.clientCredentials!.scopes);
  const authorization = t.bearer({ scopes, admin: true });
  // The token endpoint's example is its body; the client authenticates with HTTP Basic.
  const client = await createClient(t.database.db, { name: 'examples', scopes });
  const basic = `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`;

  // The server gives payment and model ids: a path's {id} is the one its collection's creation got.
  const created = new Map<string, string>();
  const tried: string[] = [];
  for (const entry of operationsOf(doc).sort((a, b) => rank(a) - rank(b))) {
    const { method, path, operation } = entry;
    const where = `${method} ${path}`;
    const collection = path.split('/{id}')[0]!;
    let url = path.replace('{id}', () => encodeURIComponent(created.get(collection) ?? String(operation.parameters?.find((p) => p.in === 'path')?.schema?.example)));
    const query = new URLSearchParams();
    for (const parameter of operation.parameters ?? []) {
      const example = parameter.example ?? parameter.schema?.example;
      if (parameter.in === 'query' && example !== undefined) query.set(parameter.name, String(example));
      if (parameter.required && parameter.in === 'query') expect(example, `${where}: example of ${parameter.name}`).toBeDefined();
    }
    if (query.size > 0) url += `?${query}`;
    const [contentType, media] = Object.entries(operation.requestBody?.content ?? {})[0] ?? [];
    const body = exampleOf(media);
    if (operation.requestBody) expect(body, `${where}: request example`).toBeDefined();
    const form = contentType === 'application/x-www-form-urlencoded';
    const res = await t.app.inject({
      method: method.toUpperCase() as 'GET' | 'POST',
      url,
      headers: {
        authorization: path === '/oauth/token' ? basic : authorization,
        ...(contentType ? { 'content-type': contentType } : {}),
      },
      ...(body === undefined ? {} : { payload: form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body) }),
    });
    const status = successStatus(operation);
    expect(res.statusCode, `${where}: ${res.body}`).toBe(status);
    tried.push(operation.operationId!);

    // A 204 has no body.
    const answer = (res.body === '' ? {} : res.json()) as { id?: string; data?: { id?: string } };
    if (rank(entry) === 0) {
      const id = answer.data?.id ?? answer.id;
      if (id) created.set(path, id);
    }
    // What a creation or a read of one record answers is the documented example, but for the
    // ids and times the server gives (an id the request chose is compared too).
    const documented = documentedAnswer(operation, status);
    if (documented !== undefined && (rank(entry) === 0 || path.endsWith('{id}'))) {
      const keepId = method === 'post' && typeof (body as { id?: unknown } | undefined)?.id === 'string';
      expect(withoutGenerated(answer, keepId), `${where}: answer against its documented example`).toEqual(withoutGenerated(documented, keepId));
    }
  }
  expect(tried.sort()).toEqual(operationsOf(doc).map(({ operation }) => operation.operationId).sort());
});

it('the list example finds the payment the record example made', async () => {
  const list = doc.paths['/payments/v1/session-payments']!.get!;
  const record = doc.paths['/payments/v1/session-payments']!.post!;
  const sessionIds = String(list.parameters!.find((p) => p.name === 'sessionIds')!.schema!.example).split(',');
  expect(sessionIds).toContain((exampleOf(record.requestBody!.content['application/json']) as { session: string }).session);
});

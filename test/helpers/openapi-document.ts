import type { TestApp } from './test-app.js';

// The parts of an OpenAPI 3.1 document the tests read.
export interface MediaType {
  schema?: Record<string, unknown>;
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}

export interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: 'query' | 'path' | 'header'; required?: boolean; schema?: { example?: unknown }; example?: unknown }[];
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, { description: string; headers?: Record<string, unknown>; content?: Record<string, MediaType> }>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string; license?: { name: string; identifier?: string; url?: string } };
  servers?: { url: string }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Record<string, unknown>>;
    securitySchemes: Record<string, { type: string; flows?: { clientCredentials?: { tokenUrl: string; scopes: Record<string, string> } } }>;
  };
}

export async function fetchDocument(t: TestApp): Promise<OpenApiDocument> {
  const res = await t.app.inject({ url: '/openapi.json' });
  if (res.statusCode !== 200) throw new Error(`/openapi.json answered ${res.statusCode}`);
  return res.json() as OpenApiDocument;
}

export interface DocumentedOperation {
  method: string;
  path: string;
  operation: Operation;
}

export function operationsOf(doc: OpenApiDocument): DocumentedOperation[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ method, path, operation })));
}

// The example of a media type, whichever way the document gives it.
export function exampleOf(media: MediaType | undefined): unknown {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  return media.examples ? Object.values(media.examples)[0]?.value : undefined;
}

// The lowest 2xx status an operation documents: what its example must be answered with.
export function successStatus(operation: Operation): number {
  const statuses = Object.keys(operation.responses)
    .map(Number)
    .filter((s) => s >= 200 && s < 300)
    .sort((a, b) => a - b);
  if (statuses.length === 0) throw new Error('no success documented');
  return statuses[0]!;
}

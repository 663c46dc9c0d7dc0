// Writes docs/protocol.md from the protocol's zod schemas (through z.toJSONSchema), so the doc
// cannot drift from the code: a test compares the file with what this produces.
// Regenerate: node src/service/docs/protocol-doc.ts --write
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import {
  API_PREFIX,
  AgentStartRequestSchema,
  AgentStartResponseSchema,
  AgentStopRequestSchema,
  AgentCheckRequestSchema,
  AgentCheckResponseSchema,
  CommandAckRequestSchema,
  ErrorCodeSchema,
  ErrorResponseSchema,
  MAX_BODY_BYTES,
  MAX_JSON_DEPTH,
  MAX_JSON_ELEMENTS,
  PROTOCOL_VERSION,
  MAX_QUEUED_REPORTS,
  REPORT_CLOCK_TOLERANCE,
  REPORT_INTERVAL_SECONDS,
  ReportRequestSchema,
  ReportResponseSchema,
  TARGET_KIND_PATTERN,
} from '../../protocol/v1.ts';
import { TARGETS } from '../../agent/targets/registry.ts';

export const PROTOCOL_DOC_PATH = join(import.meta.dirname, '..', '..', '..', 'docs', 'protocol.md');

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema | boolean;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minItems?: number;
  maxItems?: number;
}

interface Row {
  field: string;
  type: string;
  required: boolean;
  rules: string;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function rulesOf(s: JsonSchema): string[] {
  const rules: string[] = [];
  if (s.const !== undefined) rules.push(`= ${JSON.stringify(s.const)}`);
  if (s.enum) rules.push(`one of ${s.enum.map((v) => `\`${String(v)}\``).join(', ')}`);
  if (s.format === 'date-time') rules.push('ISO 8601 date-time with offset');
  else if (s.format) rules.push(`format ${s.format}`);
  if (s.pattern && s.format !== 'date-time') rules.push(`matches \`${s.pattern}\``);
  // Which kinds exist is the targets' registry's, not the protocol's: named here for readers.
  if (s.pattern === TARGET_KIND_PATTERN.source) rules.push(`the agent's targets: ${TARGETS.kinds.map((k) => `\`${k}\``).join(', ')}`);
  if (s.minLength !== undefined && s.minLength > 0) rules.push(`≥ ${s.minLength} chars`);
  if (s.maxLength !== undefined) rules.push(`≤ ${s.maxLength} chars`);
  if (s.minimum !== undefined && s.minimum > -MAX_SAFE) rules.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) rules.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined && s.maximum < MAX_SAFE) rules.push(`≤ ${s.maximum}`);
  if (s.maxItems !== undefined) rules.push(`≤ ${s.maxItems} items`);
  return rules;
}

function typeOf(s: JsonSchema): string {
  if (s.anyOf) return s.anyOf.map(typeOf).join(' or ');
  if (Array.isArray(s.type)) return s.type.join(' or ');
  if (s.type === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object') return 'map';
  return s.type ?? 'any';
}

function walk(s: JsonSchema, path: string, required: boolean, out: Row[], nullable = false): void {
  if (s.anyOf) {
    const nonNull = s.anyOf.filter((b) => b.type !== 'null');
    const hasNull = nonNull.length < s.anyOf.length;
    if (nonNull.length === 1) return walk(nonNull[0]!, path, required, out, hasNull || nullable);
    out.push({
      field: path,
      type: `${nonNull.map(typeOf).join(' or ')}${hasNull ? ' or null' : ''}`,
      required,
      rules: nonNull.flatMap(rulesOf).join('; '),
    });
    return;
  }
  if (s.oneOf) {
    for (const branch of s.oneOf) {
      const tag = Object.entries(branch.properties ?? {}).find(([, p]) => p.const !== undefined);
      walk(branch, tag ? `${path}${path ? ' ' : ''}(${tag[0]} = ${JSON.stringify(tag[1].const)})` : path, required, out, nullable);
    }
    return;
  }
  const suffix = nullable ? ' or null' : '';
  if (s.type === 'object' && s.properties) {
    if (path) out.push({ field: path, type: `object${suffix}`, required, rules: 'no other keys' });
    const req = new Set(s.required ?? []);
    for (const [key, child] of Object.entries(s.properties)) walk(child, path ? `${path}.${key}` : key, req.has(key), out);
    return;
  }
  if (s.type === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object') {
    const keyRules = s.propertyNames ? rulesOf(s.propertyNames).map((r) => `keys ${r}`) : [];
    out.push({
      field: path,
      type: `map${suffix}`,
      required,
      rules: [...keyRules, `values: ${typeOf(s.additionalProperties)} ${rulesOf(s.additionalProperties).join(', ')}`.trim()].join('; '),
    });
    return;
  }
  if (s.type === 'array' && s.items) {
    out.push({ field: path, type: `array${suffix}`, required, rules: rulesOf(s).join('; ') });
    walk(s.items, `${path}[]`, true, out);
    return;
  }
  out.push({ field: path, type: `${typeOf(s)}${suffix}`, required, rules: rulesOf(s).join('; ') });
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|');
}

export function fieldTable(schema: z.ZodType, io: 'input' | 'output'): string {
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  const rows: Row[] = [];
  walk(json, '', true, rows);
  const lines = ['| field | type | required | rules |', '| --- | --- | --- | --- |'];
  for (const r of rows)
    lines.push(`| \`${escapeCell(r.field)}\` | ${escapeCell(r.type)} | ${r.required ? 'yes' : 'no'} | ${escapeCell(r.rules)} |`);
  return lines.join('\n');
}

interface RouteDoc {
  title: string;
  method: 'POST';
  path: string;
  purpose: string;
  request: z.ZodType;
  response: { status: number; schema: z.ZodType | null; note: string };
  errors: string[];
}

const ROUTES: RouteDoc[] = [
  {
    title: 'Agent start',
    method: 'POST',
    path: `${API_PREFIX}/databases/{databaseId}/agent/start`,
    purpose:
      "Takes the database's lease: one live agent per database. While another agent holds a live lease the answer is 409 `agent_conflict`, whose message names the holder (host, pid, version, start time) and when its lease expires; an agent that presents `resumeLeaseId` equal to the live lease (the same agent, restarted in its directory) takes it back at once. A start after the lease lapsed or was released gets a new lease. The `target` must be the one the database entry was created with (400 otherwise).",
    request: AgentStartRequestSchema,
    response: { status: 200, schema: AgentStartResponseSchema, note: 'The lease, and the interval to report at.' },
    errors: [
      "400 `bad_request`: a field is wrong, or the target differs from the database entry's",
      '409 `agent_conflict`: another agent holds the lease',
    ],
  },
  {
    title: 'Report',
    method: 'POST',
    path: `${API_PREFIX}/databases/{databaseId}/reports`,
    purpose:
      "Stores one interval's report (metrics, settings, target metrics, events) and renews the lease. The answer carries the interval until the next report (the database's own, or the service default) and, when there is one, the oldest command not yet acknowledged: a command sent and not acknowledged is sent again, with the same id, in the next answer (the agent deduplicates by id). " +
      'Per lease (from its start; a resumed lease starts again too), `seq` increases: the last report sent again under its `seq` (its answer was lost) gets the same kind of answer and is not stored twice; a lower `seq` is refused. ' +
      `\`sentAt\` (stamped when the report is sent) may be at most ${REPORT_CLOCK_TOLERANCE.aheadSeconds} s ahead of the service's clock and ${REPORT_CLOCK_TOLERANCE.behindSeconds} s (the agent's queue at its longest, ${MAX_QUEUED_REPORTS} reports of ${REPORT_INTERVAL_SECONDS.max} s) behind it. ` +
      "The dashboard's latest report is the one received last, whatever its `sentAt`. " +
      "A trial (an apply a tuning session issues) is handed out only until its deadline (its session's window): one the agent has not received by then is cancelled, never delivered late. Revoking an API key cancels the apply commands not acknowledged yet; reverts are still delivered. " +
      "A `plan` command changes nothing: the agent plans its heaviest statements (the top of pg_stat_statements up to 80 % of the time, at most 50) under each candidate's values with `EXPLAIN` in read-only transactions it rolls back, and for each threshold finds by bisection the smallest value between `low` and `high` (bounded by the catalog's bounds for its machine) that flips a statement's plan; the acknowledgement's `plans` carries the answer (fingerprints and costs, never a literal: docs/plans.md). An agent whose `postgresql.include_plans` is off refuses it (`include_plans is off`); its start's `system.includePlans` tells the service.",
    request: ReportRequestSchema,
    response: { status: 200, schema: ReportResponseSchema, note: '`command` is null when there is nothing to do (hold).' },
    errors: [
      '400 `bad_request`: a field is wrong, or `sentAt` is beyond the clock tolerance (the message names `body.sentAt`)',
      "409 `lease_expired`: the lease lapsed, was released, or is not this database's live lease: start again",
      "409 `report_out_of_order`: `seq` is below the lease's last one (the message names both): start again",
    ],
  },
  {
    title: 'Command acknowledgement',
    method: 'POST',
    path: `${API_PREFIX}/databases/{databaseId}/commands/{commandId}/ack`,
    purpose:
      "Records the outcome of a command and marks it done. Accepted from the agent whose lease is the database's latest one, even if that lease lapsed meanwhile (the outcome describes a change that agent made); acknowledging a command twice is harmless (the first outcome stays).",
    request: CommandAckRequestSchema,
    response: { status: 204, schema: null, note: 'No body.' },
    errors: [
      '400 `bad_request`',
      '404 `not_found`: no such command for this database',
      '409 `lease_expired`: another agent has taken the database since',
    ],
  },
  {
    title: 'Agent stop',
    method: 'POST',
    path: `${API_PREFIX}/databases/{databaseId}/agent/stop`,
    purpose: 'Releases the lease, so that another agent may start at once. Stopping a lease that already lapsed is a no-op.',
    request: AgentStopRequestSchema,
    response: { status: 204, schema: null, note: 'No body.' },
    errors: ['400 `bad_request`', "409 `lease_expired`: the lease id is not the database's latest lease"],
  },
  {
    title: 'Agent check',
    method: 'POST',
    path: `${API_PREFIX}/databases/{databaseId}/agent/check`,
    purpose:
      "The preflight's call (`tuner-agent --check`): answers whether the API key and the database id are accepted, and the target the database was set up for. It takes no lease and changes nothing.",
    request: AgentCheckRequestSchema,
    response: { status: 200, schema: AgentCheckResponseSchema, note: 'The target the database was set up for.' },
    errors: ['400 `bad_request`'],
  },
];

export function protocolDoc(): string {
  const parts: string[] = [];
  parts.push(`# Protocol v${PROTOCOL_VERSION}: tuner-agent ↔ tuning service

<!-- generated by \`node src/service/docs/protocol-doc.ts --write\` from src/protocol/v1.ts: edit the schemas, not this file -->

JSON over HTTP(S) between \`tuner-agent\` and the tuning service. The schemas in
\`src/protocol/v1.ts\` (and \`src/protocol/report.ts\` for the metrics) are the contract: both sides
validate what they receive with them, and the field tables below are generated from them
(\`z.toJSONSchema\`).

## Requests

- **Method and paths**: every call is a \`POST\` under \`${API_PREFIX}\`, with the database id (a UUID, from
  the agent setup page) in the path.
- **Authentication**: \`Authorization: Bearer <api_key>\`, a key of that database that has not been
  revoked. A missing, wrong or revoked key gets 401 \`unauthorized\`, whatever the database id; a
  live key of another database gets 404 \`not_found\` (check the database id), whether or not the
  path's database exists. Neither answer says which ids exist: it depends on the key only, and
  only a holder of the key learns that it is live. The service stores only SHA-256 hashes of
  keys and compares them in constant time. Authentication happens before the body is read.
- **Bodies**: \`Content-Type: application/json\` (anything else: 415 \`unsupported_media_type\`),
  optionally \`Content-Encoding: gzip\` (other encodings: 415; a body that is not valid gzip: 400).
  At most ${MAX_BODY_BYTES} bytes (${MAX_BODY_BYTES / 1024 / 1024} MiB), counted after decompression: a larger body, or a
  gzip body that inflates beyond it, gets 413 \`payload_too_large\`. JSON nested deeper than
  ${MAX_JSON_DEPTH} levels gets 400 \`bad_request\`, and more than ${MAX_JSON_ELEMENTS} array items and
  object members in all 413, both found in one pass over the text before it is parsed (a report
  nests 5 levels and, at every limit of the protocol, holds fewer than 20,000). Objects are strict: a key
  that is not in the schema is an error. Rules across fields are checked too (in a report:
  \`statements.top\` has at most \`topN\` rows, and \`top\` plus \`other.statements\` equals
  \`activeStatements\`).
- **Leases**: one live agent per database. A lease lasts max(3 × report interval, 30 s) from the
  start or from the last report; each report renews it, stop releases it.

## Errors

Every error is a JSON body \`{ "error": { "code", "message" } }\` with a 4xx or 5xx status. The
message is meant for a person: for a validation error it names each wrong field by its path and
says what was expected, e.g. \`body.metrics.statements.top[3].calls: Too small: expected number
to be >=0\` (at most five problems, then a count).

| code | status | meaning |
| --- | --- | --- |
| \`bad_request\` | 400 (414 for an overlong path) | the body or the path is wrong; the message says where |
| \`unauthorized\` | 401 | no API key, or not a live key of any database |
| \`forbidden\` | 403 | (people's API) not allowed |
| \`not_found\` | 404 | no such route; a live API key of another database than the path's (check the database id); or no such command for this database |
| \`agent_conflict\` | 409 | another agent holds the database's lease; the message names it |
| \`lease_expired\` | 409 | the lease is not live (lapsed, released, or replaced): start again |
| \`report_out_of_order\` | 409 | a report's \`seq\` is below its lease's last one: start again (a start begins a new sequence) |
| \`conflict\` | 409 | (people's API) the name is taken, or a limit of the organization is reached |
| \`payload_too_large\` | 413 | body over the limit, before or after decompression |
| \`unsupported_media_type\` | 415 | not JSON, or an encoding other than gzip |
| \`rate_limited\` | 429 | (people's API) too many failed logins; Retry-After says when to try again |
| \`internal\` | 500 | the service failed; nothing about the cause is shown, it is logged |

All codes: ${ErrorCodeSchema.options.map((c) => `\`${c}\``).join(', ')}.

Error body:

${fieldTable(ErrorResponseSchema, 'output')}
`);
  for (const route of ROUTES) {
    parts.push(`## ${route.title}

\`${route.method} ${route.path}\`

${route.purpose}

### Request body

${fieldTable(route.request, 'input')}

### Response: ${route.response.status}

${route.response.note}
${route.response.schema ? `\n${fieldTable(route.response.schema, 'output')}\n` : ''}
### Errors

${[...route.errors, '401 `unauthorized` (a key of no database) and 404 `not_found` (a key of another database), 413 `payload_too_large`, 415 `unsupported_media_type` as for every route'].map((e) => `- ${e}`).join('\n')}
`);
  }
  return `${parts.join('\n').trimEnd()}\n`;
}

if (import.meta.main && process.argv.includes('--write')) {
  writeFileSync(PROTOCOL_DOC_PATH, protocolDoc());
  console.log(`wrote ${PROTOCOL_DOC_PATH}`);
}

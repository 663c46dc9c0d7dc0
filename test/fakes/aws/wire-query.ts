// The query protocol of RDS and EC2 as the SDK speaks it: a form-encoded POST
// (`Action=…&Version=…&Parameters.Parameter.1.ParameterName=…`) answered with XML. RDS nests the
// payload in `<ActionResult>` and wraps errors in `<ErrorResponse><Error>`; EC2 puts the payload
// right under the root and wraps errors in `<Response><Errors><Error>`.
import { randomUUID } from 'node:crypto';

export type Form = ReadonlyMap<string, string>;

export function parseForm(body: string): Form {
  return new Map(new URLSearchParams(body));
}

/** Members of a query list: `prefix.1.Name=a&prefix.1.Value=b&prefix.2…` → [{Name, Value}, …]. */
export function formList(form: Form, prefix: string): Array<Record<string, string>> {
  const items = new Map<number, Record<string, string>>();
  for (const [key, value] of form) {
    if (!key.startsWith(`${prefix}.`)) continue;
    const rest = key.slice(prefix.length + 1);
    const dot = rest.indexOf('.');
    const index = Number(dot < 0 ? rest : rest.slice(0, dot));
    if (!Number.isInteger(index)) continue;
    const item = items.get(index) ?? {};
    item[dot < 0 ? '' : rest.slice(dot + 1)] = value;
    items.set(index, item);
  }
  return [...items.entries()].sort(([a], [b]) => a - b).map(([, item]) => item);
}

/** An XML tree as plain data: an array under a key becomes repeated elements with that name. */
export type XmlValue = string | number | boolean | undefined | XmlObject | XmlValue[];
export interface XmlObject {
  [tag: string]: XmlValue;
}

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function render(tag: string, value: XmlValue): string {
  if (value === undefined) return '';
  if (Array.isArray(value)) return value.map((v) => render(tag, v)).join('');
  if (typeof value === 'object')
    return `<${tag}>${Object.entries(value)
      .map(([k, v]) => render(k, v))
      .join('')}</${tag}>`;
  return `<${tag}>${escape(String(value))}</${tag}>`;
}

export const RDS_NAMESPACE = 'http://rds.amazonaws.com/doc/2014-10-31/';
export const EC2_NAMESPACE = 'http://ec2.amazonaws.com/doc/2016-11-15/';

export function rdsResponse(action: string, result: XmlObject): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${RDS_NAMESPACE}">` +
    render(`${action}Result`, result) +
    render('ResponseMetadata', { RequestId: randomUUID() }) +
    `</${action}Response>`
  );
}

export function ec2Response(action: string, result: XmlObject): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${EC2_NAMESPACE}">` +
    render('requestId', randomUUID()) +
    Object.entries(result)
      .map(([k, v]) => render(k, v))
      .join('') +
    `</${action}Response>`
  );
}

export function rdsError(code: string, message: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="${RDS_NAMESPACE}">` +
    render('Error', { Type: 'Sender', Code: code, Message: message }) +
    render('RequestId', randomUUID()) +
    '</ErrorResponse>'
  );
}

export function ec2Error(code: string, message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response>${render('Errors', { Error: { Code: code, Message: message } })}${render('RequestID', randomUUID())}</Response>`;
}

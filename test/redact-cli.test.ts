// What the agent prints, end to end in-process: `--check` and `--once` with a configuration whose
// secrets are written in the forms the hostile test found leaking (a URL password with `/`, a proxy
// URL and a server_url with credentials, libpq keyword values quoted, escaped or with commas).
// Nothing listens on the ports, so the commands fail, and their messages name the URLs.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { main } from '../src/agent/process/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'tuner-redact-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: string[], env: Record<string, string>): Promise<string> {
  let printed = '';
  const write = (text: string) => void (printed += text);
  await main(argv, env, dir, { out: write, err: write });
  return printed;
}

/** Every 6-character run of `secret` found in `output`. */
function leakedRuns(secret: string, output: string): string[] {
  const runs: string[] = [];
  for (let i = 0; i + 6 <= secret.length; i++) if (output.includes(secret.slice(i, i + 6))) runs.push(secret.slice(i, i + 6));
  return runs;
}

const URL_CASES: Array<{ secrets: string[]; env: Record<string, string> }> = [
  {
    secrets: ['k9/Fq+Zt==x', 'Pr0xy/Pass-1', 'Srv/P@ss#1?x'],
    env: {
      AGENT_POSTGRESQL_CONNECTION_URL: 'postgresql://agent_user:k9/Fq+Zt==x@127.0.0.1:9/postgres',
      AGENT_TUNER_PROXY_URL: 'http://proxy-user:Pr0xy/Pass-1@127.0.0.1:9',
      AGENT_TUNER_SERVER_URL: 'https://agent:Srv/P@ss#1?x@127.0.0.1:9/',
      AGENT_TUNER_API_KEY: 'tuner_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG',
      AGENT_TUNER_DATABASE_ID: '00000000-0000-4000-8000-000000000001',
    },
  },
  ...[
    'host=127.0.0.1 port=9 password="AgentPw-S3cret!x"',
    'host=127.0.0.1 password=Zq@7\\ xKw9Lm port=9',
    'password=Agent,Pw-S3cret host=x',
  ].map((url) => ({
    secrets: [/password=(.*?)(?: port| host|$)/.exec(url)![1]!.replace(/^"|"$/g, '').replace(/\\ /g, ' ')],
    env: { AGENT_POSTGRESQL_CONNECTION_URL: url },
  })),
];

for (const command of ['--check', '--once']) {
  test(`${command}: no secret of the configuration in anything printed`, async () => {
    for (const { secrets, env } of URL_CASES) {
      const printed = await run(['--local', command, ...(command === '--once' ? ['--interval', '1'] : [])], env);
      assert.ok(printed.length > 0, 'the command printed something');
      for (const secret of secrets) assert.deepEqual(leakedRuns(secret, printed), [], `${secret} in:\n${printed}`);
    }
  });
}

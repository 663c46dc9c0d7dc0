// The systemd unit shipped in deploy/systemd: `systemd-analyze verify` (Debian's systemd package)
// accepts it without a single warning, in a throwaway root that holds the system's own units and
// an instance directory with an executable, so that it runs in a container without systemd as
// PID 1 and touches nothing of this machine. It keeps what docs/operations.md promises, and that
// page shows it as it is. Without systemd-analyze the verification is skipped, and says why;
// under CI (which installs it) it fails instead.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';

const ROOT = join(import.meta.dirname, '..');
const UNIT_NAME = 'tuner-agent@.service';
const UNIT = readFileSync(join(ROOT, 'deploy', 'systemd', UNIT_NAME), 'utf8');
const INSTANCE = 'orders-db';

const SYSTEM_UNITS = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((dir) => existsSync(join(dir, 'sysinit.target')));
const ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((file) => existsSync(file));
const inCi = process.env['CI'] === 'true';
const missing =
  !ANALYZE || !SYSTEM_UNITS ? 'systemd-analyze or the system units are not installed (Debian package systemd; .ci/run installs it)' : null;
if (missing && !inCi) process.stdout.write(`# skipping systemd-analyze verify: ${missing}\n`);

/** The unit's settings in one section, as key → values. */
function section(text: string, name: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let current = '';
  for (const line of text.split('\n')) {
    const header = /^\[(.+)\]$/.exec(line.trim());
    if (header) current = header[1]!;
    else if (current === name && /^[A-Za-z]+=/.test(line)) {
      const [key, ...value] = line.split('=');
      settings.set(key!, [...(settings.get(key!) ?? []), value.join('=')]);
    }
  }
  return settings;
}

describe('the systemd unit', () => {
  const roots: string[] = [];
  after(() => {
    for (const dir of roots) rmSync(dir, { recursive: true, force: true });
  });

  /** A root with the system's units, the unit under test and the instance's executable. */
  function throwawayRoot(unitText: string): string {
    const root = mkdtempSync(join(tmpdir(), 'tuner-systemd-'));
    roots.push(root);
    cpSync(SYSTEM_UNITS!, join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
    mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
    writeFileSync(join(root, 'etc/systemd/system', UNIT_NAME), unitText);
    const instanceDir = join(root, 'var/lib/tuner-agent', INSTANCE);
    mkdirSync(instanceDir, { recursive: true });
    writeFileSync(join(instanceDir, 'tuner-agent'), '#!/bin/sh\n');
    chmodSync(join(instanceDir, 'tuner-agent'), 0o755);
    return root;
  }

  async function verify(unitText: string): Promise<{ code: number; stderr: string }> {
    const root = throwawayRoot(unitText);
    try {
      const { stderr } = await promisify(execFile)(ANALYZE!, [`--root=${root}`, 'verify', `tuner-agent@${INSTANCE}.service`], {
        timeout: 60_000,
      });
      return { code: 0, stderr };
    } catch (err) {
      const failed = err as { code?: number; stderr?: string };
      return { code: typeof failed.code === 'number' ? failed.code : 1, stderr: failed.stderr ?? String(err) };
    }
  }

  test('systemd-analyze verify accepts it without a warning', { skip: !inCi && missing ? missing : false }, async () => {
    assert.equal(missing, null, `CI=true: ${missing}`);
    const result = await verify(UNIT);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr.trim(), '', 'no warning either');
  });

  test('and it would say so of a mistake (the verification can fail)', { skip: !inCi && missing ? missing : false }, async () => {
    const result = await verify(UNIT.replace('Restart=always', 'Restart=sometimes\nRestartSecs=10'));
    assert.match(result.stderr, /sometimes/);
    assert.match(result.stderr, /Unknown key .?RestartSecs/);
  });

  test('it runs the agent as docs/operations.md says: restarted always, a dedicated user, its directory, SIGTERM with time', () => {
    const service = section(UNIT, 'Service');
    assert.deepEqual(service.get('Restart'), ['always']);
    assert.deepEqual(service.get('User'), ['tuner-agent']);
    assert.deepEqual(service.get('WorkingDirectory'), ['/var/lib/tuner-agent/%i']);
    assert.deepEqual(service.get('StateDirectory'), ['tuner-agent/%i']);
    assert.deepEqual(service.get('ExecStart'), ['/var/lib/tuner-agent/%i/tuner-agent $TUNER_AGENT_TARGET']);
    assert.deepEqual(service.get('KillSignal'), ['SIGTERM']);
    assert.deepEqual(service.get('RestartPreventExitStatus'), ['2 5'], 'exit 2 and 5 of docs/cli.md need a person');
    assert.ok(!service.has('ExecReload'), 'a reload would send SIGHUP, which stops the agent');
  });

  test('docs/operations.md shows the unit as it is shipped', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    assert.ok(doc.includes(`\`\`\`ini\n${UNIT}\`\`\``), 'the unit in docs/operations.md differs from deploy/systemd/tuner-agent@.service');
    assert.ok(readFileSync(join(ROOT, 'README.md'), 'utf8').includes('docs/operations.md'), 'README links the page');
  });
});

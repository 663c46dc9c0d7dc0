// Single sign-on's users on both storages, through the sign-in's own logic (people/sso.ts) with a
// provider's claims as openid-client hands them over: a user is linked to the provider's issuer
// and subject, not the name (a renamed person stays the same user, renamed when the name is free);
// a local user's name is not taken over; the role follows the groups at every sign-in (audited),
// except that the last admin is not demoted; an email outside the allowed domains and a person
// without a mapped group are refused and recorded, with no account created. A user who signs in
// has no password that logs in.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SsoConfig } from '../src/service/app/config.ts';
import { verifyPassword } from '../src/service/people/passwords.ts';
import { groupsOf, roleOf, signInWithSso } from '../src/service/people/sso.ts';
import { SsoRefusal } from '../src/service/people/sso-client.ts';
import { UsernameTakenError } from '../src/service/people/store.ts';
import { openFreshStorage } from './helpers/fleet-fixture.ts';
import { STORAGE_KINDS } from './helpers/service.ts';

const ISSUER = 'https://idp.example.com';

const sso: SsoConfig = {
  issuer: ISSUER,
  name: 'Example',
  clientId: 'tuner',
  clientSecret: 'not-used-here',
  redirectUrl: 'https://tuner.example.com/login/sso/callback',
  scopes: 'openid',
  groupsClaim: 'groups',
  roles: new Map([
    ['admins', 'admin'],
    ['dba', 'operator'],
    ['readers', 'viewer'],
  ]),
  defaultRole: null,
  emailDomains: [],
  organization: 'acme',
};

test('groups give the highest mapped role, else the default', () => {
  assert.deepEqual(groupsOf({ sub: 'x', groups: ['a', 3, 'b'] }, 'groups'), ['a', 'b']);
  assert.deepEqual(groupsOf({ sub: 'x', roles: 'one' }, 'roles'), ['one']);
  assert.equal(roleOf(sso, ['readers', 'dba', 'other']), 'operator');
  assert.equal(roleOf(sso, ['other']), null);
  assert.equal(roleOf({ ...sso, defaultRole: 'viewer' }, []), 'viewer');
});

for (const kind of STORAGE_KINDS) {
  describe(`single sign-on's users on ${kind}`, () => {
    test('linked by issuer and subject, renamed when free; local names kept; no password', async () => {
      const { storage, dispose } = await openFreshStorage(kind);
      try {
        const first = await storage.createOrganization('acme', 'root', 'not-a-real-hash');
        const link = { issuer: ISSUER, subject: 'sub-1' };
        const created = await storage.upsertSsoUser(link, first.organizationId, 'ann', 'viewer');
        assert.equal(created.created, true);
        assert.equal(created.user.role, 'viewer');
        const again = await storage.upsertSsoUser(link, first.organizationId, 'ann', 'admin');
        assert.deepEqual(again, { user: created.user, created: false }, 'the same user; its role is not the store’s to change here');
        const renamed = await storage.upsertSsoUser(link, first.organizationId, 'ann.smith', 'viewer');
        assert.equal(renamed.user.id, created.user.id);
        assert.equal(renamed.user.username, 'ann.smith');
        // A name another user has stays theirs: the renamed person keeps their old name.
        const kept = await storage.upsertSsoUser(link, first.organizationId, 'root', 'viewer');
        assert.equal(kept.user.username, 'ann.smith');
        // The same subject at another issuer is another person; a new person with a taken name is refused.
        await assert.rejects(
          storage.upsertSsoUser({ issuer: 'https://other.example.com', subject: 'sub-1' }, first.organizationId, 'root', 'viewer'),
          UsernameTakenError,
        );
        const stored = await storage.findUserForLogin('ann.smith');
        assert.equal(await verifyPassword('', stored!.passwordHash), false);
        assert.equal(await verifyPassword('none$single-sign-on', stored!.passwordHash), false);
        assert.equal(await storage.findOrganizationByName('acme'), first.organizationId);
        assert.equal(await storage.findOrganizationByName('nobody'), null);
        await storage.createOrganization('acme', 'root2', 'not-a-real-hash');
        assert.equal(await storage.findOrganizationByName('acme'), null, 'an ambiguous name is no organization');
      } finally {
        await dispose();
      }
    });

    test('signing in: roles follow groups (audited), the last admin stays, refusals create nobody', async () => {
      const { storage, dispose } = await openFreshStorage(kind);
      try {
        const root = await storage.createOrganization('acme', 'root', 'not-a-real-hash');
        const deps = { stores: { people: storage, audit: storage } };
        const signIn = (sub: string, groups: string[], extra: Record<string, unknown> = {}, config = sso) =>
          signInWithSso(deps, config, { sub, preferred_username: sub, groups, ...extra }, '10.0.0.9');

        const bob = await signIn('bob', ['dba']);
        assert.equal(bob.role, 'operator');
        assert.equal(bob.organizationId, root.organizationId);
        assert.equal((await signIn('bob', ['readers'])).role, 'viewer');
        // A local user named like the person: the person gets a name of their own.
        const other = await signIn('root', ['readers']);
        assert.match(other.username, /^root-[0-9a-f]{8}$/);

        const events = await storage.listAudit(root.organizationId, { limit: 50 });
        const changed = events.find((e) => e.action === 'user.role_changed');
        assert.deepEqual(changed?.details['role'], { before: 'operator', after: 'viewer' });
        assert.equal(changed?.actor.via, 'sso');
        assert.equal(events.filter((e) => e.action === 'login' && e.actor.name === 'bob').length, 2);

        // The only admin by groups loses them: refused, still admin (the organization keeps one).
        const ada = await signIn('ada', ['admins']);
        assert.equal(ada.role, 'admin');
        await storage.removeUser(root.organizationId, root.id);
        await assert.rejects(signIn('ada', ['readers']), (err: unknown) => err instanceof SsoRefusal && /last admin/.test(err.message));
        assert.equal((await storage.getUser(root.organizationId, ada.id))?.role, 'admin');

        await assert.rejects(signIn('zed', ['marketing']), (err: unknown) => err instanceof SsoRefusal && err.status === 403);
        // Entra ID's groups overage: a reference instead of the list. Neither the default role nor
        // a demotion: refused, and bob keeps the role his listed groups gave him.
        const overage = {
          _claim_names: { groups: 'src1' },
          _claim_sources: { src1: { endpoint: 'https://graph.microsoft.com/v1.0/users/x/getMemberObjects' } },
        };
        const signInOverage = (sub: string, config = sso) =>
          signInWithSso(deps, config, { sub, preferred_username: sub, ...overage }, '10.0.0.9');
        await assert.rejects(
          signInOverage('bob', { ...sso, defaultRole: 'viewer' }),
          (err: unknown) => err instanceof SsoRefusal && /instead of the list/.test(err.message),
        );
        await assert.rejects(signInOverage('olive', { ...sso, defaultRole: 'viewer' }), SsoRefusal);
        assert.equal((await storage.getUser(root.organizationId, bob.id))?.role, 'viewer');
        const domains = { ...sso, emailDomains: ['example.com'] };
        await assert.rejects(
          signIn('eve', ['dba'], { email: 'eve@evil.test' }, domains),
          (err: unknown) => err instanceof SsoRefusal && /eve@evil.test/.test(err.message),
        );
        await assert.rejects(
          signIn('eve', ['dba'], { email: 'eve@example.com', email_verified: false }, domains),
          (err: unknown) => err instanceof SsoRefusal,
        );
        assert.equal((await signIn('eve', ['dba'], { email: 'Eve@Example.com' }, domains)).role, 'operator');
        const users = (await storage.listUsers(root.organizationId)).map((u) => u.username);
        assert.ok(!users.includes('zed') && !users.includes('olive'), 'a refused person has no account');
        const refusals = (await storage.listAudit(root.organizationId, { action: 'login.refused', limit: 50 })).map((e) => [
          e.actor.name,
          e.details['reason'],
        ]);
        assert.deepEqual(refusals.sort(), [
          ['ada', 'last admin would lose the role'],
          ['bob', 'groups not listed (overage)'],
          ['eve', 'email domain not allowed: evil.test'],
          ['eve', 'email not verified'],
          ['olive', 'groups not listed (overage)'],
          ['zed', 'no mapped group'],
        ]);
      } finally {
        await dispose();
      }
    });
  });
}

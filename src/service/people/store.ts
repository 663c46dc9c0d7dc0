// What the people feature asks of its storage: users, each with an account of their own, and
// their login sessions (a browser's or an API client's, not a tuning session).
export interface User {
  id: string;
  accountId: string;
  username: string;
  isAdmin: boolean;
  createdAt: Date;
}

export interface LoginSession {
  user: User;
  csrfToken: string;
  expiresAt: Date;
}

export interface PeopleStore {
  /** Creates the first admin unless a user exists; true when created (both under a lock). */
  createFirstAdmin(username: string, passwordHash: string): Promise<boolean>;
  /** A user with an account of their own. Throws UsernameTakenError. */
  createUser(username: string, passwordHash: string, isAdmin: boolean): Promise<User>;
  findUserForLogin(username: string): Promise<{ user: User; passwordHash: string } | null>;
  listUsers(): Promise<User[]>;
  createLoginSession(tokenHash: string, userId: string, csrfToken: string, expiresAt: Date): Promise<void>;
  findLoginSession(tokenHash: string): Promise<LoginSession | null>;
  deleteLoginSession(tokenHash: string): Promise<void>;
}

export class UsernameTakenError extends Error {
  override name = 'UsernameTakenError';
}

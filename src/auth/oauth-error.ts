// RFC 6749 §5.2 errors of the token endpoint; oauth-error-family.ts renders them as { error, error_description }.
export type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unsupported_grant_type' | 'invalid_scope';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    // set when the client tried HTTP Basic: the 401 must then challenge with Basic (RFC 6749 §5.2)
    readonly basicChallenge = false,
  ) {
    super(description);
    this.name = 'OAuthError';
  }

  get statusCode(): number {
    return this.error === 'invalid_client' ? 401 : 400;
  }
}

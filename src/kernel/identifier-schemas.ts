// Zod schemas for the rules of identifiers.ts, used by both API families' request schemas.
import { z } from 'zod';
import {
  canonicalName,
  canonicalText,
  describeProblem,
  identifierProblems,
  nameProblems,
  type IdentifierRule,
  type TextProblem,
} from './identifiers.js';

function addProblems(ctx: z.RefinementCtx<string>, input: string, problems: TextProblem[], maxLength: number): void {
  for (const problem of problems) {
    const message = describeProblem(problem, maxLength);
    if (problem === 'empty' || problem === 'blank') {
      ctx.addIssue({ code: 'too_small', origin: 'string', minimum: 1, inclusive: true, input, message });
    } else if (problem === 'too_long') {
      ctx.addIssue({ code: 'too_big', origin: 'string', maximum: maxLength, inclusive: true, input, message });
    } else {
      ctx.addIssue({ code: 'invalid_format', format: 'regex', input, message });
    }
  }
}

// Stored and compared in NFC; the rules apply to what is stored.
export function identifierSchema(rule: IdentifierRule) {
  return z
    .string()
    .overwrite(canonicalText)
    .superRefine((s, ctx) => addProblems(ctx, s, identifierProblems(s, rule), rule.maxLength))
    .meta({ minLength: 1, maxLength: rule.maxLength });
}

// Free text: trimmed and in NFC before the rules apply, so they hold for what is stored.
export function nameSchema(maxLength: number) {
  return z
    .string()
    .overwrite(canonicalName)
    .superRefine((s, ctx) => addProblems(ctx, s, nameProblems(s, maxLength), maxLength))
    .meta({ minLength: 1, maxLength });
}

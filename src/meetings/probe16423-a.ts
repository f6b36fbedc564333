import { b } from './probe16423-b.ts';
export const a = (): number => b() + 1;

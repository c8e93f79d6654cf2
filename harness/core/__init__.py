"""The numbers: element formats, scale rules, schemes, the reference quantizer, seeded
inputs, and the error bounds every comparison uses. Depends on torch alone."""

"""The answer step: reading evidence into an answer, the sentences it reads, the check."""

"""JSON Schemas: the wire contract of every file format compact reads or writes."""

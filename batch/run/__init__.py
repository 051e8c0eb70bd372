"""Running a conversion: the memory model, and what each batch runs on."""

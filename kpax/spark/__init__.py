"""kpax.spark — the PySpark data source named "kpax" (batch and streaming, read and write).

Imports: the public kpax API; pyspark and pyarrow only inside the data source methods.
"""

import { getDMMF } from "@prisma/get-dmmf";
import { readFileSync } from "node:fs";
const dmmf: any = await getDMMF({ datamodel: readFileSync(process.argv[2]!, "utf8") });
console.log(Object.keys(dmmf), Object.keys(dmmf.datamodel));
console.log(JSON.stringify(dmmf.datamodel.indexes, null, 1));
for (const m of dmmf.datamodel.models) console.log(m.name, JSON.stringify(m.primaryKey), JSON.stringify(m.uniqueIndexes), Object.keys(m));
